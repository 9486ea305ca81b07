//! The benchmark's data: Parquet files written with arrow, each of
//! [`COLUMNS`] Int64 columns of pseudo-random values (plain, uncompressed:
//! a file's size is what was asked), in one row group.

use anyhow::Context;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use std::sync::Arc;

/// Columns per file.
pub(super) const COLUMNS: usize = 8;

/// The columns a hot query reads: the first two.
pub(super) const HOT_COLUMNS: [usize; 2] = [0, 1];

/// A generated file: its bytes, its rows and the sum of its first column
/// (each query's answer is checked against it).
pub(super) struct ParquetFile {
    pub(super) bytes: Vec<u8>,
    pub(super) rows: usize,
    pub(super) first_column_sum: i64,
}

/// A file of about `bytes` bytes whose values derive from `seed`.
pub(super) fn parquet_file(bytes: u64, seed: u64) -> anyhow::Result<ParquetFile> {
    let rows = (bytes / (8 * COLUMNS as u64)).max(1) as usize;
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Small enough that sums of a file's column never overflow.
        (x >> 24) as i64
    };
    let columns: Vec<(String, ArrayRef)> = (0..COLUMNS)
        .map(|c| {
            let values = Int64Array::from_iter_values((0..rows).map(|_| next()));
            (format!("c{c}"), Arc::new(values) as ArrayRef)
        })
        .collect();
    let first_column_sum = columns[0]
        .1
        .as_any()
        .downcast_ref::<Int64Array>()
        .map(|a| a.values().iter().sum())
        .unwrap_or(0);
    let batch = RecordBatch::try_from_iter(columns).context("building a record batch")?;
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(rows))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props))
        .context("starting a Parquet file")?;
    writer.write(&batch).context("writing a Parquet file")?;
    writer.close().context("finishing a Parquet file")?;
    Ok(ParquetFile {
        bytes: out,
        rows,
        first_column_sum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_have_the_size_asked_and_differ_by_seed() {
        let a = parquet_file(256 << 10, 1).unwrap();
        let b = parquet_file(256 << 10, 2).unwrap();
        let size = a.bytes.len() as u64;
        assert!(
            (256 << 10..(256 << 10) + (16 << 10)).contains(&size),
            "{size}"
        );
        assert_eq!(a.rows, 4096);
        assert_ne!(a.first_column_sum, b.first_column_sum);
        assert_eq!(&a.bytes[..4], b"PAR1");
    }
}
