//! HAProxy-grammar configuration parser.
