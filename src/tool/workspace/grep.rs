//! `grep`: a deterministic, bounded walk of the workspace with a regex
//! matched line by line.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use super::{is_skipped_dir, shorten_line, GrepArgs, Workspace, WorkspaceError};

/// Matches reported when the caller does not say.
const DEFAULT_MATCHES: usize = 50;
/// Cap on the compiled regex (and its lazy DFA cache), so a pathological
/// pattern such as `(\w{50}){50}` fails to compile instead of eating memory.
const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;

pub(super) fn grep(ws: &Workspace, args: &GrepArgs) -> Result<String, WorkspaceError> {
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
        stats: Stats::default(),
    };
    let (start_abs, start_rel) = glob
        .as_ref()
        .and_then(|g| g.start_dir(ws))
        .unwrap_or_else(|| (ws.root.clone(), String::new()));
    search.walk(start_abs, start_rel);
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
    /// is always correct, just slower.
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
        let rel = literal.join("/");
        let lexical = ws.root.join(&rel);
        let plain = Path::new(&rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        // Starting inside `target/` would dodge the skip the walk applies.
        if !plain || literal.iter().any(|c| is_skipped_dir(c)) {
            return None;
        }
        match ws.resolve(&rel) {
            Ok(canonical) if canonical == lexical && canonical.is_dir() => {
                Some((canonical, format!("{rel}/")))
            }
            _ => None,
        }
    }
}

#[derive(Default)]
struct Stats {
    matches: usize,
    files_with_matches: usize,
    visited: usize,
    searched: usize,
    binary: usize,
    large: usize,
    unreadable: usize,
    stopped_at_matches: bool,
    stopped_at_files: bool,
}

struct Search<'a> {
    ws: &'a Workspace,
    regex: &'a Regex,
    glob: Option<&'a PathGlob>,
    want: usize,
    out: String,
    stats: Stats,
}

/// One thing still to visit, with its path relative to the root (using `/`).
struct Pending {
    abs: PathBuf,
    rel: String,
    is_dir: bool,
}

impl Search<'_> {
    fn stopped(&self) -> bool {
        self.stats.stopped_at_matches || self.stats.stopped_at_files
    }

    /// Depth-first, each directory's entries in name order, using an explicit
    /// stack so a deep tree cannot overflow the call stack. `dir_rel` is
    /// empty for the root, else ends with `/`.
    fn walk(&mut self, dir_abs: PathBuf, dir_rel: String) {
        let mut stack = vec![Pending {
            abs: dir_abs,
            rel: dir_rel,
            is_dir: true,
        }];
        while let Some(item) = stack.pop() {
            if self.stopped() {
                break;
            }
            if !item.is_dir {
                self.visit_file(&item.abs, &item.rel);
                continue;
            }
            let Ok(read_dir) = fs::read_dir(&item.abs) else {
                self.stats.unreadable += 1;
                continue;
            };
            let mut children: Vec<Pending> = Vec::new();
            for entry in read_dir {
                let Ok(entry) = entry else {
                    self.stats.unreadable += 1;
                    continue;
                };
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    self.stats.unreadable += 1;
                    continue;
                };
                let rel = format!("{}{name}", item.rel);
                if kind.is_dir() {
                    if !is_skipped_dir(&name) {
                        children.push(Pending {
                            abs: entry.path(),
                            rel: format!("{rel}/"),
                            is_dir: true,
                        });
                    }
                } else if kind.is_symlink() {
                    // Linked directories are never followed (no cycles, no
                    // escapes); a linked file counts only if it resolves to a
                    // regular file inside the root.
                    if let Ok(target) = entry.path().canonicalize() {
                        if target.starts_with(&self.ws.root) && target.is_file() {
                            children.push(Pending {
                                abs: target,
                                rel,
                                is_dir: false,
                            });
                        }
                    }
                } else if kind.is_file() {
                    children.push(Pending {
                        abs: entry.path(),
                        rel,
                        is_dir: false,
                    });
                }
            }
            // Reverse order on the stack pops the smallest name first.
            children.sort_unstable_by(|a, b| b.rel.cmp(&a.rel));
            stack.extend(children);
        }
    }

    fn visit_file(&mut self, abs: &Path, rel: &str) {
        if self.stats.visited >= self.ws.limits.max_files_scanned {
            self.stats.stopped_at_files = true;
            return;
        }
        self.stats.visited += 1;
        if self.glob.is_some_and(|g| !g.is_match(rel)) {
            return;
        }
        let max = self.ws.limits.max_scan_bytes;
        let Ok(meta) = fs::metadata(abs) else {
            self.stats.unreadable += 1;
            return;
        };
        if meta.len() > max {
            self.stats.large += 1;
            return;
        }
        // Bounded read: the file may have grown since `metadata`.
        let mut bytes = Vec::new();
        let read =
            File::open(abs).and_then(|f| f.take(max.saturating_add(1)).read_to_end(&mut bytes));
        if read.is_err() {
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
        for (index, line) in text.lines().enumerate() {
            let Some(m) = self.regex.find(line) else {
                continue;
            };
            if self.stats.matches >= self.want {
                self.stats.stopped_at_matches = true;
                break;
            }
            self.stats.matches += 1;
            found_here = true;
            let shown = shorten_line(
                line,
                self.ws.limits.max_line_chars,
                Some((m.start(), m.end())),
            );
            self.out
                .push_str(&format!("{rel}:{}: {shown}\n", index + 1));
        }
        if found_here {
            self.stats.files_with_matches += 1;
        }
    }

    fn finish(mut self) -> String {
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
        summary.push_str(")\n");
        self.out.push_str(&summary);
        tracing::debug!(
            matches = s.matches,
            searched = s.searched,
            visited = s.visited,
            "workspace grep done"
        );
        self.out
    }
}

fn files(n: usize) -> &'static str {
    if n == 1 {
        "file"
    } else {
        "files"
    }
}
