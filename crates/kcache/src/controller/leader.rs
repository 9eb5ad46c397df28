//! Warm standby: running the workers only while leading.
