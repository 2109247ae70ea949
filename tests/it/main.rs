//! One integration-test binary (link once): each module tests one command.

mod check;
