//! Text as the decisions log stores it: as is, or compressed with zstd
//! when that is smaller.
//!
//! A logged decision's answer is an explain summary of a few KiB (the
//! writer bench's, 21 filters and 8 weights, is 6,352 bytes of JSON), which
//! SQLite stores across a leaf page and an overflow page. Packed it is 656
//! bytes (`cargo bench --bench writer` prints both), so a row fits
//! in its leaf page beside others, and the store's writer, whose cost is
//! the pages each commit writes to the write-ahead log, writes fewer pages
//! for a logged decision (docs/performance.md).

use std::cell::RefCell;

use super::StoreError;

/// How text was packed: the `answer_codec` column's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// The text's UTF-8 bytes.
    Plain,
    /// A zstd frame of the text's UTF-8 bytes.
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Plain => "plain",
            Codec::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Codec> {
        match name {
            "plain" => Some(Codec::Plain),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// Text shorter than this is kept plain: it fits in a row as it is, and a
/// zstd frame's own header would be most of what it saves.
const MIN_PACKED_BYTES: usize = 256;

/// zstd's fastest level: the writer packs every logged answer on its own
/// task, and this level already brings a summary within its page (the
/// writer bench prints the size and `pack_us_median`). No benchmark here
/// compares the higher levels.
const LEVEL: i32 = 1;

/// The most packed text unpacks to: far above a log row's answer (a
/// summary of a few KiB, or an answer kept whole up to 16 KiB), so that no
/// row is refused, and low enough that a damaged frame header cannot make
/// a read allocate gigabytes.
const MAX_UNPACKED_BYTES: usize = 64 * 1024 * 1024;

thread_local! {
    /// This thread's zstd contexts, made on first use and kept. Making one
    /// per row (`zstd::bulk::compress`) allocated and zeroed its working
    /// memory every time: `ZSTD_createCCtx` and mimalloc's zeroing were
    /// about 3 % of the server's samples under `http_schedule`
    /// (docs/performance.md), more than compressing the row.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// `bytes` compressed with this thread's context; `None` if zstd fails
/// (only on allocation).
fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with_borrow_mut(|kept| {
        let compressor = match kept {
            Some(compressor) => compressor,
            None => kept.insert(zstd::bulk::Compressor::new(LEVEL).ok()?),
        };
        compressor.compress(bytes).ok()
    })
}

/// A zstd frame decompressed with this thread's context.
fn decompress(frame: &[u8]) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with_borrow_mut(|kept| {
        let decompressor = match kept {
            Some(decompressor) => decompressor,
            None => kept.insert(zstd::bulk::Decompressor::new()?),
        };
        decompressor.decompress(frame, MAX_UNPACKED_BYTES)
    })
}

/// Text packed for a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    codec: Codec,
    bytes: Vec<u8>,
}

impl Packed {
    /// Packs `text`: compressed when that makes it smaller, else plain.
    pub fn pack(text: &str) -> Packed {
        if text.len() >= MIN_PACKED_BYTES {
            // Compressing a slice in memory fails only on allocation.
            if let Some(bytes) = compress(text.as_bytes())
                && bytes.len() < text.len()
            {
                return Packed {
                    codec: Codec::Zstd,
                    bytes,
                };
            }
        }
        Packed {
            codec: Codec::Plain,
            bytes: text.as_bytes().to_vec(),
        }
    }

    /// Text as a row holds it, read back.
    pub fn from_stored(codec: Codec, bytes: Vec<u8>) -> Packed {
        Packed { codec, bytes }
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The bytes as stored.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The text packed; `what` names it in the error if the bytes are not
    /// what was packed.
    pub fn unpack(self, what: &str) -> Result<String, StoreError> {
        let bytes = match self.codec {
            Codec::Plain => self.bytes,
            // In one call, into a buffer of the size the frame records: the
            // streaming decoder took 49 µs for the writer bench's summary,
            // this 7–10 µs (`unpack_us_median`).
            Codec::Zstd => {
                decompress(&self.bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))?
            }
        };
        String::from_utf8(bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_stays_plain_and_long_text_is_packed_smaller() {
        let short = Packed::pack("{}");
        assert_eq!((short.codec(), short.bytes()), (Codec::Plain, &b"{}"[..]));

        let long = format!(
            "[{}]",
            vec![r#"{"unit":"Filter","skipped":true}"#; 50].join(",")
        );
        let packed = Packed::pack(&long);
        assert_eq!(packed.codec(), Codec::Zstd);
        assert!(
            packed.bytes().len() * 10 < long.len(),
            "{} bytes",
            packed.bytes().len()
        );
        assert_eq!(packed.unpack("test").expect("unpacks"), long);
    }

    #[test]
    fn bytes_that_are_not_a_frame_are_reported_corrupt_not_returned() {
        let bad = Packed::from_stored(Codec::Zstd, b"{not zstd}".to_vec());
        let err = bad.unpack("the answer of decision 1").expect_err("corrupt");
        assert!(matches!(err, StoreError::Corrupt(m) if m.starts_with("the answer of decision 1")));
    }

    #[test]
    fn a_thread_packs_and_unpacks_many_texts_with_its_kept_contexts() {
        let texts: Vec<String> = (0..20)
            .map(|i| format!("[{}]", vec![format!(r#"{{"host":{i}}}"#); 40 + i].join(",")))
            .collect();
        let packed: Vec<Packed> = texts.iter().map(|t| Packed::pack(t)).collect();
        // A damaged frame in between leaves the kept context usable.
        assert!(
            Packed::from_stored(Codec::Zstd, b"{not zstd}".to_vec())
                .unpack("bad")
                .is_err()
        );
        for (text, packed) in texts.iter().zip(packed) {
            assert_eq!(packed.codec(), Codec::Zstd);
            assert_eq!(&packed.unpack("test").expect("unpacks"), text);
        }
    }

    #[test]
    fn codec_names_round_trip() {
        for codec in [Codec::Plain, Codec::Zstd] {
            assert_eq!(Codec::from_name(codec.name()), Some(codec));
        }
        assert_eq!(Codec::from_name("gzip"), None);
    }
}
