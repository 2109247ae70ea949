//! Acknowledged breaks: a separate TOML file (not the spec), because an acknowledgement is
//! about one transition (old → new) and should be deleted once it has shipped, while the spec
//! lives on; kept in the spec, it would silently accept the next break of the same kind.
//!
//! ```toml
//! [[acknowledged]]
//! spec = "research_topic"
//! code = "input-required-added"
//! reason = "All callers are in this repository and were updated in the same change."
//! ```

use std::path::Path;

use serde::Deserialize;

/// An acknowledgements file that cannot be used.
#[derive(thiserror::Error)]
pub enum AckError {
    /// It cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// It is not the format above, or an entry has no reason.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

crate::debug_as_display!(AckError);

/// One accepted break: a spec, a code, and why it is fine.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acknowledged {
    /// The spec's name.
    pub spec: String,
    /// The diagnostic code accepted for that spec.
    pub code: String,
    /// Why (required, non-empty: a reviewer reads it).
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AckFile {
    #[serde(default)]
    acknowledged: Vec<Acknowledged>,
}

/// Reads an acknowledgements file.
pub fn load_acknowledged(path: &Path) -> Result<Vec<Acknowledged>, AckError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| AckError::Io {
        path: shown.clone(),
        source,
    })?;
    parse_acknowledged(&shown, &text)
}

/// Parses an acknowledgements file's text (`shown` names it in errors).
pub fn parse_acknowledged(shown: &str, text: &str) -> Result<Vec<Acknowledged>, AckError> {
    let bad = |message: String| AckError::Invalid {
        path: shown.to_owned(),
        message,
    };
    let file: AckFile = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    for a in &file.acknowledged {
        if a.reason.trim().is_empty() {
            return Err(bad(format!(
                "[[acknowledged]] {} / {}: `reason` must say why the break is accepted",
                a.spec, a.code
            )));
        }
    }
    Ok(file.acknowledged)
}
