//! `read_file`: streams the file, keeping in memory only the lines that will
//! be returned, and stops reading soon after they are collected: it reads on
//! at most `max_scan_bytes` past them to count the file's lines (and check the
//! text stays UTF-8). A file that does not end within that is reported with
//! its line count as "at least N", so a huge file costs neither memory nor
//! time beyond those bounds. Binary content beyond that read-ahead goes
//! unnoticed; what is shown has been checked.

use std::io::{self, Read};

use super::{ReadFileArgs, Workspace, WorkspaceError};

/// Bytes of `max_file_bytes` kept back for the closing `… truncated` line, so
/// the whole answer, footer included, stays within the limit.
const FOOTER_RESERVE: usize = 160;

/// Bytes asked of the file per read.
const CHUNK: usize = 64 * 1024;

pub(super) fn read_file(ws: &Workspace, args: &ReadFileArgs) -> Result<Shown, WorkspaceError> {
    let rel = args.path.as_str();
    let (file, meta) = ws.open_regular(rel)?;
    let start = args.start_line.map_or(1, |n| n as usize);
    let end = args.end_line.map(|n| n as usize);
    if let Some(end) = end {
        if end < start {
            return Err(WorkspaceError::BadRange {
                path: rel.to_owned(),
                detail: format!("start_line {start} is after end_line {end}"),
            });
        }
    }
    let limit = ws.limits.max_file_bytes;
    let budget = limit.saturating_sub(FOOTER_RESERVE).max(limit / 2);
    let request = Request {
        rel,
        start,
        end,
        budget,
        lookahead: ws.limits.max_scan_bytes,
        size: meta.len(),
    };
    render(file, &request)
}

/// What `read_file` shows, and the file's own text within it: the lines without their
/// numbers, cut markers or footer, which is what a grounded output may quote.
pub(crate) struct Shown {
    pub(crate) text: String,
    pub(crate) evidence: String,
}

/// What `read_file` was asked for, after validation.
pub(super) struct Request<'a> {
    pub(super) rel: &'a str,
    pub(super) start: usize,
    pub(super) end: Option<usize>,
    /// Bytes of numbered lines the answer may hold (the footer comes on top).
    pub(super) budget: usize,
    /// Bytes read on, once the answer is settled, to count the file's lines.
    pub(super) lookahead: u64,
    /// The file's size, named when its lines could not all be counted.
    pub(super) size: u64,
}

/// Reads `reader` as text and renders the requested lines with their footer.
#[cfg(test)]
pub(super) fn render_text(reader: impl Read, req: &Request<'_>) -> Result<String, WorkspaceError> {
    render(reader, req).map(|s| s.text)
}

/// [`render_text`], with the file's own text kept apart.
fn render(mut reader: impl Read, req: &Request<'_>) -> Result<Shown, WorkspaceError> {
    let (rel, start, end) = (req.rel, req.start, req.end);
    let mut render = Render::new(start, end.unwrap_or(usize::MAX), req.budget);
    let mut utf8 = Utf8Check::default();
    let mut buf = vec![0u8; CHUNK];
    let mut read_total: u64 = 0;
    // Bytes read when the answer was settled; from then on only counting remains.
    let mut settled_at: Option<u64> = None;
    let complete = loop {
        let want = match settled_at {
            Some(at) => {
                let left = req.lookahead.saturating_sub(read_total - at);
                if left == 0 {
                    break false;
                }
                usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK))
            }
            None => CHUNK,
        };
        let n = match reader.read(&mut buf[..want]) {
            Ok(0) => break true,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WorkspaceError::from_io(rel, e)),
        };
        read_total += n as u64;
        let chunk = &buf[..n];
        if !utf8.feed(chunk) {
            return Err(WorkspaceError::NotUtf8 {
                path: rel.to_owned(),
            });
        }
        render.feed(chunk);
        if settled_at.is_none() && render.settled() {
            settled_at = Some(read_total);
        }
    };
    // Stopping early may cut a character in two; only a complete file must end whole.
    if complete && !utf8.finish() {
        return Err(WorkspaceError::NotUtf8 {
            path: rel.to_owned(),
        });
    }
    let counted = render.finish(complete);

    if complete && counted == 0 && start == 1 {
        return Ok(Shown {
            text: "(empty file)\n".to_owned(),
            evidence: String::new(),
        });
    }
    if complete && start > counted {
        return Err(WorkspaceError::BadRange {
            path: rel.to_owned(),
            detail: format!(
                "start_line {start} is past the end of the file, which has {counted} line{}",
                plural(counted)
            ),
        });
    }
    let shown_end = render.last_shown;
    let mut out = render.out;
    // How the total reads in footers: exact, or a lower bound when the file
    // was not read to its end.
    let of_total = if complete {
        counted.to_string()
    } else {
        format!(
            "at least {counted} (not all counted: the file is {} bytes)",
            req.size
        )
    };
    let wanted_end = match end {
        Some(end) if complete => end.min(counted),
        Some(end) => end,
        None if complete => counted,
        None => usize::MAX,
    };
    if shown_end < wanted_end {
        out.push_str(&format!(
            "… truncated: showing lines {start}-{shown_end} of {of_total}; \
             ask for start_line={} to continue\n",
            shown_end + 1
        ));
    } else if let Some(end) = end.filter(|&e| complete && e > counted) {
        out.push_str(&format!(
            "(lines {start}-{shown_end} of {counted}; end_line {end} is past the end of the file)\n"
        ));
    } else if start > 1 || !complete || wanted_end < counted {
        out.push_str(&format!("(lines {start}-{shown_end} of {of_total})\n"));
    }
    Ok(Shown {
        text: out,
        evidence: render.evidence,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Accumulates the numbered output lines from a byte stream.
struct Render {
    start: usize,
    end: usize,
    budget: usize,
    out: String,
    /// The shown lines' own text, one per line.
    evidence: String,
    /// Last line number written to `out`, 0 before any.
    last_shown: usize,
    /// Set once a line did not fit; later lines are only counted.
    full: bool,
    /// 1-based number of the line being read.
    line_no: usize,
    /// Whether the current line has any bytes yet (decides whether a final
    /// line without a trailing newline counts).
    in_line: bool,
    /// Bytes kept of the current line, at most `budget + 4`.
    cur: Vec<u8>,
    /// Characters of the current line beyond what `cur` kept.
    cur_dropped_chars: usize,
    last_byte: u8,
    /// The current line goes on past where reading stopped, so its dropped
    /// count is a lower bound.
    line_open: bool,
}

impl Render {
    fn new(start: usize, end: usize, budget: usize) -> Self {
        Self {
            start,
            end,
            budget,
            out: String::new(),
            evidence: String::new(),
            last_shown: 0,
            full: false,
            line_no: 1,
            in_line: false,
            cur: Vec::new(),
            cur_dropped_chars: 0,
            last_byte: 0,
            line_open: false,
        }
    }

    fn collecting(&self) -> bool {
        !self.full && self.line_no >= self.start && self.line_no <= self.end
    }

    /// Whether what the answer shows is settled, so that reading on can only
    /// count lines: the output is full, the range is past, or the current
    /// line is already too long to fit whole (it will be shown cut, or not at
    /// all).
    fn settled(&self) -> bool {
        self.full
            || self.line_no > self.end
            || (self.collecting() && self.cur.len() >= self.budget + 4)
    }

    fn feed(&mut self, chunk: &[u8]) {
        for piece in chunk.split_inclusive(|&b| b == b'\n') {
            let (body, ends_line) = match piece.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (piece, false),
            };
            if !body.is_empty() {
                self.in_line = true;
                self.last_byte = body[body.len() - 1];
                if self.collecting() {
                    // A line longer than the whole budget can only be shown
                    // cut, so there is no point keeping more of it.
                    let room = (self.budget + 4).saturating_sub(self.cur.len());
                    let keep = room.min(body.len());
                    self.cur.extend_from_slice(&body[..keep]);
                    self.cur_dropped_chars += count_chars(&body[keep..]);
                }
            }
            if ends_line {
                self.finish_line();
                self.line_no += 1;
            }
        }
    }

    /// Ends the stream; returns the number of lines seen, which is the
    /// file's line count when `complete` (read to its end) and a lower bound
    /// otherwise. A line cut off by an early stop is shown with a lower
    /// bound on its dropped characters.
    fn finish(&mut self, complete: bool) -> usize {
        if self.in_line {
            self.line_open = !complete;
            self.finish_line();
            self.line_no
        } else {
            self.line_no - 1
        }
    }

    fn finish_line(&mut self) {
        if self.collecting() {
            self.emit_line();
        }
        self.cur.clear();
        self.cur_dropped_chars = 0;
        self.in_line = false;
        self.last_byte = 0;
    }

    fn emit_line(&mut self) {
        // CRLF files: the `\r` is line-ending noise, not content.
        if self.last_byte == b'\r' && !self.line_open {
            if self.cur_dropped_chars > 0 {
                self.cur_dropped_chars -= 1;
            } else {
                self.cur.pop();
            }
        }
        let mut dropped = self.cur_dropped_chars;
        let text = match std::str::from_utf8(&self.cur) {
            Ok(s) => s,
            // Cut mid-character by the keep limit; the stream-wide check has
            // already vouched for the bytes themselves.
            Err(e) => {
                dropped += 1;
                std::str::from_utf8(&self.cur[..e.valid_up_to()]).unwrap_or_default()
            }
        };
        let open = self.line_open;
        let prefix = format!("{:>5}| ", self.line_no);
        let whole_len = prefix.len() + text.len() + 1 + marker(dropped, open).len();
        if self.out.len() + whole_len <= self.budget {
            self.out.push_str(&prefix);
            self.out.push_str(text);
            self.out.push_str(&marker(dropped, open));
            self.out.push('\n');
            self.evidence
                .push_str(super::whole_words(text, false, dropped > 0 || open));
            self.evidence.push('\n');
            self.last_shown = self.line_no;
            return;
        }
        self.full = true;
        if self.last_shown != 0 {
            return;
        }
        // Not even the first requested line fits: show its head, marked, so
        // the model still gets something and knows exactly what is missing.
        let marker_room = marker(text.chars().count() + dropped, open).len();
        let room = self.budget.saturating_sub(prefix.len() + 1 + marker_room);
        let mut cut = room.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = dropped + text[cut..].chars().count();
        self.out.push_str(&prefix);
        self.out.push_str(&text[..cut]);
        self.out.push_str(&marker(dropped, open));
        self.out.push('\n');
        self.evidence
            .push_str(super::whole_words(&text[..cut], false, true));
        self.evidence.push('\n');
        self.last_shown = self.line_no;
    }
}

/// The cut marker; `open` when the line goes on past where reading stopped.
fn marker(dropped_chars: usize, open: bool) -> String {
    if open {
        format!("…[+at least {dropped_chars} chars]")
    } else if dropped_chars == 0 {
        String::new()
    } else {
        format!("…[+{dropped_chars} chars]")
    }
}

/// Counts UTF-8 characters by their lead bytes (valid input assumed; the
/// stream check rejects anything else).
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// Incremental UTF-8 validation across chunk boundaries. A NUL byte also
/// fails: it is valid UTF-8 but a near-certain sign of a binary file.
#[derive(Default)]
pub(super) struct Utf8Check {
    /// Bytes of a character split across the previous chunk boundary (≤ 3).
    pending: Vec<u8>,
}

impl Utf8Check {
    /// Feeds the next chunk; false as soon as the stream cannot be text.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> bool {
        if chunk.contains(&0) {
            return false;
        }
        let mut chunk = chunk;
        // Complete a character split at the last boundary, one byte at a time.
        while !self.pending.is_empty() {
            let Some((&b, rest)) = chunk.split_first() else {
                return true;
            };
            self.pending.push(b);
            chunk = rest;
            match std::str::from_utf8(&self.pending) {
                Ok(_) => self.pending.clear(),
                Err(e) if e.error_len().is_none() => {}
                Err(_) => return false,
            }
        }
        match std::str::from_utf8(chunk) {
            Ok(_) => true,
            Err(e) if e.error_len().is_none() => {
                self.pending.extend_from_slice(&chunk[e.valid_up_to()..]);
                true
            }
            Err(_) => false,
        }
    }

    /// Ends the stream; false if it stopped mid-character.
    pub(super) fn finish(&self) -> bool {
        self.pending.is_empty()
    }
}
