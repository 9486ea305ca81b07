//! Reference replacement policies from the papers (being written).
