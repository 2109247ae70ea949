//! Integration tests, one binary.

mod providers;
