//! A command's output kept within a bound: the head and the tail, the middle counted and
//! dropped, so a command that prints gigabytes costs a fixed amount of memory.

use std::collections::VecDeque;

/// The bytes of one stream as they arrive.
pub(super) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: u64,
}

impl Capture {
    /// Keeps at most `max` bytes: the first half and the last half of the stream.
    pub(super) fn new(max: usize) -> Self {
        let half = max / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            half,
            total: 0,
        }
    }

    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let room = self.half.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.is_empty() || self.half == 0 {
            return;
        }
        if bytes.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
        } else {
            let over = (self.tail.len() + bytes.len()).saturating_sub(self.half);
            self.tail.drain(..over);
            self.tail.extend(bytes);
        }
    }

    /// The text kept (lossy UTF-8), with the cut marked where bytes were dropped.
    pub(super) fn finish(self) -> super::Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let dropped = self.total - kept;
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if dropped == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return super::Captured {
                text: String::from_utf8_lossy(&all).into_owned(),
                total_bytes: self.total,
                cut: false,
            };
        }
        // Cut on character boundaries, so the cut itself makes no replacement characters.
        let head = &self.head[..utf8_prefix(&self.head)];
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (0x80..0xC0).contains(*b))
            .count();
        let tail = &tail[skip..];
        let dropped = self.total - head.len() as u64 - tail.len() as u64;
        let text = format!(
            "{}\n[… {dropped} bytes cut …]\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        );
        super::Captured {
            text,
            total_bytes: self.total,
            cut: true,
        }
    }
}

/// The length of `bytes` without a character left incomplete at its end.
fn utf8_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        // Invalid bytes inside: lossy conversion marks them; only a cut character is trimmed.
        Err(_) => {
            let start = bytes.len().saturating_sub(3);
            match std::str::from_utf8(&bytes[start..]) {
                Err(e) if e.error_len().is_none() => start + e.valid_up_to(),
                _ => bytes.len(),
            }
        }
    }
}
