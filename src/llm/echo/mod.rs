//! The deterministic test providers `_echo` and `_scripted_echo`.
