//! Tests of the lock service rules.
