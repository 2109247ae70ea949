//! `list_dir`: one directory level, sorted, bounded.

use super::{is_skipped_dir, shown_name, ListDirArgs, Smallest, Workspace, WorkspaceError};

/// What `list_dir` shows, and the entries' own names within it (no `/`, `(symlink)` or notes):
/// what a grounded output may quote.
pub(super) struct Listed {
    pub(super) text: String,
    pub(super) names: String,
}

pub(super) fn list_dir(ws: &Workspace, args: &ListDirArgs) -> Result<Listed, WorkspaceError> {
    let rel = args.path.as_deref().unwrap_or(".");
    let rel = if rel.is_empty() { "." } else { rel };
    let dir = ws.open_dir(rel)?;

    // (name, display): sorted by the bare name, so a `/` suffix cannot reorder. Only the first
    // `max_entries` are kept while reading; the rest are counted.
    let max = ws.limits.max_entries;
    let mut entries: Smallest<(String, String)> = Smallest::new(max);
    let mut skipped: Vec<String> = Vec::new();
    for entry in dir.entries().map_err(|e| WorkspaceError::from_io(rel, e))? {
        let entry = entry.map_err(|e| WorkspaceError::from_io(rel, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = shown_name(&name, &[]).into_owned();
        // `file_type` does not follow links, so a link is reported as one
        // rather than as whatever it points at (which may be outside).
        let Ok(kind) = entry.file_type() else {
            let shown = format!("{shown} (unreadable)");
            entries.push((name, shown));
            continue;
        };
        if kind.is_dir() {
            if is_skipped_dir(&name) {
                skipped.push(format!("{name}/"));
            } else {
                let shown = format!("{shown}/");
                entries.push((name, shown));
            }
        } else if kind.is_symlink() {
            let shown = format!("{shown} (symlink)");
            entries.push((name, shown));
        } else {
            entries.push((name, shown));
        }
    }
    let (entries, more) = entries.into_sorted();
    skipped.sort_unstable();

    let mut out = String::new();
    if entries.is_empty() && more == 0 {
        out.push_str("(empty directory)\n");
    }
    let mut names = String::new();
    for (name, shown) in &entries {
        out.push_str(shown);
        out.push('\n');
        names.push_str(name);
        names.push('\n');
    }
    if more > 0 {
        out.push_str(&format!("… {more} more entries not shown (limit {max})\n"));
    }
    if !skipped.is_empty() {
        out.push_str(&format!(
            "(not listed: {}; build and VCS directories are not browsed)\n",
            skipped.join(", ")
        ));
    }
    Ok(Listed { text: out, names })
}
