//! Compact futex locks with lock statistics (being written).
