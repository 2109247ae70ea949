//! `grep`: a deterministic, bounded walk of the workspace with a regex
//! matched line by line. Every directory and file is opened beneath the
//! workspace's root handle, never by an absolute name.

use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use super::{
    is_escape, is_skipped_dir, read_options, shorten_line, shown_name, GrepArgs, Smallest,
    Workspace, WorkspaceError,
};

/// Matches reported when the caller does not say.
const DEFAULT_MATCHES: usize = 50;
/// Cap on the compiled regex (and its lazy DFA cache), so a pathological
/// pattern such as `(\w{50}){50}` fails to compile instead of eating memory.
const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;

/// What a search found: the text the tool returns, and the one file it searched when it
/// searched exactly one without showing all of it.
pub(super) struct Found {
    pub(super) text: String,
    pub(super) partly_shown: Option<PartlyShown>,
    /// Each file with a shown match, and the shown lines' own text.
    pub(super) evidence: Vec<(String, String)>,
}

/// The only file a search looked at, some lines of which it did not show.
pub(super) struct PartlyShown {
    /// Its path relative to the root, as the walk named it.
    pub(super) rel: String,
    /// Whether any line of it matched.
    pub(super) matched: bool,
}

pub(super) fn grep(ws: &Workspace, args: &GrepArgs) -> Result<Found, WorkspaceError> {
    let regex = compile_regex(&args.pattern)?;
    let glob = match args.path_glob.as_deref() {
        Some(g) if !g.is_empty() => Some(PathGlob::new(g)?),
        _ => None,
    };
    let want = args
        .max_matches
        .map_or(DEFAULT_MATCHES, |n| n as usize)
        .min(ws.limits.max_matches);

    let mut search = Search {
        ws,
        regex: &regex,
        glob: glob.as_ref(),
        want,
        out: String::new(),
        evidence: Vec::new(),
        stats: Stats::default(),
    };
    let (start_path, start_rel) = glob
        .as_ref()
        .and_then(|g| g.start_dir(ws))
        .unwrap_or_else(|| (PathBuf::from("."), String::new()));
    search.walk(start_path, start_rel);
    Ok(search.finish())
}

fn compile_regex(pattern: &str) -> Result<Regex, WorkspaceError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| WorkspaceError::BadPattern {
            pattern: pattern.to_owned(),
            message: e.to_string(),
        })
}

/// A compiled `path_glob`.
struct PathGlob {
    /// The glob with any leading `./` removed.
    text: String,
    matcher: GlobMatcher,
    /// A glob without `/` is matched against the file name alone, so `*.rs`
    /// means "Rust files anywhere", as in `.gitignore`.
    name_only: bool,
}

impl PathGlob {
    fn new(glob: &str) -> Result<Self, WorkspaceError> {
        let mut text = glob;
        while let Some(rest) = text.strip_prefix("./") {
            text = rest;
        }
        let matcher = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| WorkspaceError::BadGlob {
                glob: glob.to_owned(),
                message: e.kind().to_string(),
            })?
            .compile_matcher();
        Ok(Self {
            text: text.to_owned(),
            matcher,
            name_only: !text.contains('/'),
        })
    }

    fn is_match(&self, rel: &str) -> bool {
        if self.name_only {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel)
        }
    }

    /// The directory named by the glob's literal leading components
    /// (`src/model` for `src/model/**/*.rs`), so the walk need not visit the
    /// rest of the tree. Only used when it is a real directory reached
    /// without symbolic links; otherwise the walk starts at the root, which
    /// is always correct, just slower. (A link swapped in after this check
    /// is refused when the walk opens it.)
    fn start_dir(&self, ws: &Workspace) -> Option<(PathBuf, String)> {
        if self.name_only {
            return None;
        }
        let parts: Vec<&str> = self.text.split('/').collect();
        let literal: Vec<&str> = parts[..parts.len() - 1]
            .iter()
            .take_while(|p| !p.is_empty() && !p.contains(['*', '?', '[', ']', '{', '}', '\\']))
            .copied()
            .collect();
        if literal.is_empty() {
            return None;
        }
        // Starting inside `target/` would dodge the skip the walk applies.
        if literal
            .iter()
            .any(|c| matches!(*c, "." | "..") || is_skipped_dir(c))
        {
            return None;
        }
        let mut path = PathBuf::new();
        for part in &literal {
            path.push(part);
            let real_dir = ws
                .dir
                .symlink_metadata(&path)
                .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink());
            if !real_dir {
                return None;
            }
        }
        Some((path, format!("{}/", literal.join("/"))))
    }
}

#[derive(Default)]
struct Stats {
    matches: usize,
    files_with_matches: usize,
    visited: usize,
    searched: usize,
    /// The first file searched, when some of its lines were not shown.
    first_partly_shown: Option<String>,
    binary: usize,
    large: usize,
    unreadable: usize,
    /// Entries past the first `max_files_scanned + 1` of one directory, never visited.
    crowded: usize,
    stopped_at_matches: bool,
    stopped_at_files: bool,
}

struct Search<'a> {
    ws: &'a Workspace,
    regex: &'a Regex,
    glob: Option<&'a PathGlob>,
    want: usize,
    out: String,
    evidence: Vec<(String, String)>,
    stats: Stats,
}

/// One thing still to visit: its path beneath the root handle, the same
/// path as text (using `/`) for globs and output, and what the listing said
/// it was.
struct Pending {
    path: PathBuf,
    rel: String,
    kind: Kind,
}

// Ordered by `rel` alone: that is the walk's order.
impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.rel == other.rel
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rel.cmp(&other.rel)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    /// A symbolic link, searched only if it leads to a regular file inside.
    Link,
}

impl Search<'_> {
    fn stopped(&self) -> bool {
        self.stats.stopped_at_matches || self.stats.stopped_at_files
    }

    /// Depth-first, each directory's entries in name order, using an explicit
    /// stack so a deep tree cannot overflow the call stack. `dir_rel` is
    /// empty for the root, else ends with `/`.
    fn walk(&mut self, dir_path: PathBuf, dir_rel: String) {
        let mut stack = vec![Pending {
            path: dir_path,
            rel: dir_rel,
            kind: Kind::Dir,
        }];
        while let Some(item) = stack.pop() {
            if self.stopped() {
                break;
            }
            if item.kind != Kind::Dir {
                self.visit_file(&item);
                continue;
            }
            // No-follow: a directory swapped for a link after it was listed
            // is not entered, so links can never make the walk loop.
            let read_dir = self
                .ws
                .dir
                .open_with(&item.path, &read_options(true))
                .map(|f| cap_std::fs::Dir::from_std_file(f.into_std()))
                .and_then(|d| d.entries());
            let Ok(read_dir) = read_dir else {
                self.stats.unreadable += 1;
                continue;
            };
            // One more than the file limit: enough to reach it (and say so) in name order,
            // without holding every entry of a huge directory.
            let mut children = Smallest::new(self.ws.limits.max_files_scanned.saturating_add(1));
            for entry in read_dir {
                let Ok(entry) = entry else {
                    self.stats.unreadable += 1;
                    continue;
                };
                let file_name = entry.file_name();
                let name = file_name.to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    self.stats.unreadable += 1;
                    continue;
                };
                let rel = format!("{}{name}", item.rel);
                let path = item.path.join(&file_name);
                if kind.is_dir() {
                    if !is_skipped_dir(&name) {
                        children.push(Pending {
                            path,
                            rel: format!("{rel}/"),
                            kind: Kind::Dir,
                        });
                    }
                } else if kind.is_symlink() {
                    children.push(Pending {
                        path,
                        rel,
                        kind: Kind::Link,
                    });
                } else if kind.is_file() {
                    children.push(Pending {
                        path,
                        rel,
                        kind: Kind::File,
                    });
                }
            }
            let (children, crowded) = children.into_sorted();
            self.stats.crowded += crowded;
            // Reverse order on the stack pops the smallest name first.
            stack.extend(children.into_iter().rev());
        }
    }

    fn visit_file(&mut self, item: &Pending) {
        let rel = item.rel.as_str();
        if self.stats.visited >= self.ws.limits.max_files_scanned {
            self.stats.stopped_at_files = true;
            return;
        }
        // A link is opened (beneath the root, following it only while it
        // stays inside) and kept only if it leads to a regular file; linked
        // directories and links leading out are passed over without a word,
        // as if they were not there.
        let linked = if item.kind == Kind::Link {
            match self.open(&item.path, false) {
                Ok((file, meta)) if meta.is_file() => Some((file, meta)),
                Ok(_) => return,
                Err(e) if is_escape(&e) || e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => {
                    self.stats.visited += 1;
                    self.stats.unreadable += 1;
                    return;
                }
            }
        } else {
            None
        };
        self.stats.visited += 1;
        if self.glob.is_some_and(|g| !g.is_match(rel)) {
            return;
        }
        // A regular file is opened without following a link in its last
        // component: one swapped in since the listing fails to open.
        let opened = match linked {
            Some(opened) => Ok(opened),
            None => self.open(&item.path, true),
        };
        let Ok((file, meta)) = opened else {
            self.stats.unreadable += 1;
            return;
        };
        if !meta.is_file() {
            // Swapped for a FIFO or device since the listing: never read it.
            self.stats.unreadable += 1;
            return;
        }
        let max = self.ws.limits.max_scan_bytes;
        if meta.len() > max {
            self.stats.large += 1;
            return;
        }
        // Bounded read: the file may have grown since `metadata`.
        let mut bytes = Vec::new();
        if file
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .is_err()
        {
            self.stats.unreadable += 1;
            return;
        }
        if bytes.len() as u64 > max {
            self.stats.large += 1;
            return;
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) if !bytes.contains(&0) => t,
            _ => {
                self.stats.binary += 1;
                return;
            }
        };
        self.stats.searched += 1;
        let mut found_here = false;
        let mut unshown = false;
        // The matched lines' own text, without the `path:line:` prefixes and cut markers.
        let mut here = String::new();
        for (index, line) in text.lines().enumerate() {
            let Some(m) = self.regex.find(line) else {
                unshown = true;
                continue;
            };
            if self.stats.matches >= self.want {
                self.stats.stopped_at_matches = true;
                unshown = true;
                break;
            }
            self.stats.matches += 1;
            found_here = true;
            let (head, kept, tail) = shorten_line(
                line,
                self.ws.limits.max_line_chars,
                Some((m.start(), m.end())),
            );
            self.out.push_str(&format!(
                "{}:{}: {head}{kept}{tail}\n",
                shown_name(rel, &[':']),
                index + 1
            ));
            here.push_str(super::whole_words(
                &kept,
                !head.is_empty(),
                !tail.is_empty(),
            ));
            here.push('\n');
        }
        if found_here {
            self.stats.files_with_matches += 1;
            self.evidence.push((rel.to_owned(), here));
        }
        if unshown && self.stats.searched == 1 {
            self.stats.first_partly_shown = Some(rel.to_owned());
        }
    }

    /// Opens `path` beneath the root (a link in its last component refused
    /// with `nofollow`, else followed only while it stays inside) and reads
    /// its metadata from the open handle.
    fn open(
        &self,
        path: &Path,
        nofollow: bool,
    ) -> std::io::Result<(cap_std::fs::File, cap_std::fs::Metadata)> {
        let file = self.ws.dir.open_with(path, &read_options(nofollow))?;
        let meta = file.metadata()?;
        Ok((file, meta))
    }

    fn finish(mut self) -> Found {
        let s = &self.stats;
        if s.stopped_at_matches {
            self.out.push_str(&format!(
                "… stopped at {} matches; narrow the pattern or glob\n",
                s.matches
            ));
        }
        if s.stopped_at_files {
            self.out.push_str(&format!(
                "… stopped after visiting {} files; narrow path_glob to search the rest\n",
                s.visited
            ));
        }
        let mut summary = if s.matches == 0 {
            "(no matches".to_owned()
        } else {
            format!(
                "({} {} in {} {}",
                s.matches,
                if s.matches == 1 { "match" } else { "matches" },
                s.files_with_matches,
                files(s.files_with_matches)
            )
        };
        summary.push_str(&format!("; searched {} {}", s.searched, files(s.searched)));
        if s.binary > 0 {
            summary.push_str(&format!(
                "; skipped {} binary or non-UTF-8 {}",
                s.binary,
                files(s.binary)
            ));
        }
        if s.large > 0 {
            summary.push_str(&format!(
                "; skipped {} {} over {} bytes",
                s.large,
                files(s.large),
                self.ws.limits.max_scan_bytes
            ));
        }
        if s.unreadable > 0 {
            summary.push_str(&format!("; {} unreadable entries", s.unreadable));
        }
        if s.crowded > 0 && !s.stopped_at_files {
            summary.push_str(&format!(
                "; {} entries past the first {} of a directory not searched (narrow path_glob)",
                s.crowded,
                self.ws.limits.max_files_scanned.saturating_add(1)
            ));
        }
        summary.push_str(")\n");
        self.out.push_str(&summary);
        tracing::debug!(
            matches = s.matches,
            searched = s.searched,
            visited = s.visited,
            "workspace grep done"
        );
        let matched = self.stats.matches > 0;
        let partly_shown = self
            .stats
            .first_partly_shown
            .take()
            .filter(|_| self.stats.searched == 1)
            .map(|rel| PartlyShown { rel, matched });
        Found {
            text: self.out,
            partly_shown,
            evidence: self.evidence,
        }
    }
}

fn files(n: usize) -> &'static str {
    if n == 1 {
        "file"
    } else {
        "files"
    }
}
