//! [`ForeignError`]: the failure of a client library this crate does not know, carried inside
//! a [`ModelError`](super::ModelError).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// An error of another client library (an SDK a user's own [`Model`](super::Model) wraps),
/// shared so that it clones cheaply like the rest of [`ModelError`](super::ModelError).
///
/// Its `Display` and `Debug` pass [`crate::redact`]: such a client may quote a key in its
/// error text, and the text reaches traces and logs. The error itself stays reachable through
/// [`ForeignError::get`] and [`Error::source`], for a caller that knows its type.
///
/// ```
/// use subcontract::model::ModelError;
///
/// let io = std::io::Error::new(std::io::ErrorKind::Other, "socket closed");
/// let e = ModelError::foreign(io);
/// assert_eq!(e.to_string(), "socket closed");
/// let ModelError::Foreign(f) = &e else { unreachable!() };
/// assert!(f.get().downcast_ref::<std::io::Error>().is_some());
/// assert_eq!(e.clone(), e);
/// ```
#[derive(Clone)]
pub struct ForeignError(Arc<dyn Error + Send + Sync>);

impl ForeignError {
    /// Wraps `error`.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        ForeignError(Arc::new(error))
    }

    /// The error itself.
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl From<Box<dyn Error + Send + Sync>> for ForeignError {
    fn from(error: Box<dyn Error + Send + Sync>) -> Self {
        ForeignError(Arc::from(error))
    }
}

impl fmt::Display for ForeignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::redact::redact(&self.0.to_string()))
    }
}

impl fmt::Debug for ForeignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let debug = format!("{:?}", self.0);
        write!(f, "ForeignError({})", crate::redact::redact(&debug))
    }
}

impl Error for ForeignError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

/// The same shared error: two clones are equal, two errors with the same text are not.
impl PartialEq for ForeignError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;

    #[derive(Debug)]
    struct Leaky;
    impl fmt::Display for Leaky {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("401 for key sk-foreign-SECRET-42")
        }
    }
    impl Error for Leaky {}

    #[test]
    fn a_foreign_error_never_shows_a_registered_key() {
        let _key = crate::provider::ApiKey::new("sk-foreign-SECRET-42");
        let e = ModelError::foreign(Leaky);
        assert_eq!(e.to_string(), "401 for key ***");
        assert!(!format!("{e:?}").contains("SECRET"), "{e:?}");
        assert!(!e.cost_unknown());
        let boxed: Box<dyn Error + Send + Sync> = Box::new(Leaky);
        let f = ForeignError::from(boxed);
        assert!(f.get().downcast_ref::<Leaky>().is_some());
        assert_ne!(ModelError::Foreign(f.clone()), ModelError::foreign(Leaky));
        assert_eq!(ModelError::Foreign(f.clone()), ModelError::Foreign(f));
    }
}
