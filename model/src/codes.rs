//! Byte columns as the WIT sends them (WIT 0.3.0: an enum column as
//! `list<u8>`, each byte the case's WIT position; a yes/no column as
//! `list<u8>` of 1 and 0), checked eight bytes at a time and then used in
//! place.
//!
//! Decoding such a column byte by byte costs a unit a check, a store and a
//! loop's fuel and interruption checks per host, work its native build
//! never does. Checked a word at a time, the bytes can then be the column
//! as they are (`column_from_codes` in `wit_enum!`, [`flags_from_bytes`]).

/// The first byte of `codes` at or above `limit` (which must be at most
/// 0x80), if any.
pub(crate) fn first_at_or_above(codes: &[u8], limit: u8) -> Option<u8> {
    assert!(
        limit <= 0x80,
        "a limit above 0x80 cannot be checked by word"
    );
    // Adding `0x80 - limit` to a byte below 0x80 sets its high bit exactly
    // when the byte is at or above `limit`, and carries out of no byte; a
    // byte at or above 0x80 has its high bit set already. So a word holds
    // no code at or above `limit` exactly when neither sum nor word has a
    // high bit set.
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let add = u64::from_ne_bytes([0x80 - limit; 8]);
    let mut words = codes.chunks_exact(8);
    let mut bad = false;
    for word in &mut words {
        let word = u64::from_ne_bytes(word.try_into().expect("chunks of eight"));
        bad |= (word | word.wrapping_add(add)) & HIGH != 0;
    }
    if bad || words.remainder().iter().any(|&code| code >= limit) {
        codes.iter().copied().find(|&code| code >= limit)
    } else {
        None
    }
}

/// `bytes` as a column of `T`, in the same allocation.
///
/// # Safety
///
/// Every byte of `bytes` must be a valid `T`. (`T`'s size and alignment
/// being one byte is checked when this compiles.)
pub(crate) unsafe fn cast_column<T: Copy>(bytes: Vec<u8>) -> Vec<T> {
    const {
        assert!(size_of::<T>() == 1 && align_of::<T>() == 1);
    }
    let mut bytes = std::mem::ManuallyDrop::new(bytes);
    // SAFETY: the caller vouches for each byte being a valid `T`; `u8`
    // and `T` share size and alignment, so the allocation's layout is the
    // same; `bytes` is never dropped, so the allocation has one owner.
    unsafe {
        Vec::from_raw_parts(
            bytes.as_mut_ptr().cast::<T>(),
            bytes.len(),
            bytes.capacity(),
        )
    }
}

/// A yes/no column (any non-zero byte is yes) as booleans, in place when
/// every byte is 0 or 1, as the host sends them.
pub fn flags_from_bytes(bytes: Vec<u8>) -> Vec<bool> {
    if first_at_or_above(&bytes, 2).is_none() {
        // SAFETY: every byte is 0 or 1, `false` and `true`.
        unsafe { cast_column(bytes) }
    } else {
        bytes.into_iter().map(|byte| byte != 0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{first_at_or_above, flags_from_bytes};

    #[test]
    fn flags_read_any_non_zero_byte_as_yes() {
        assert_eq!(
            flags_from_bytes(vec![0, 1, 1, 0, 0, 0, 0, 0, 1]),
            [false, true, true, false, false, false, false, false, true]
        );
        assert_eq!(
            flags_from_bytes(vec![0, 2, 0, 0, 0, 0, 0, 0, 0xff]),
            [false, true, false, false, false, false, false, false, true]
        );
        assert_eq!(flags_from_bytes(Vec::new()), Vec::<bool>::new());
    }

    #[test]
    fn finds_the_first_code_out_of_range_wherever_it_is() {
        for len in [0, 1, 7, 8, 9, 16, 23, 64] {
            let codes: Vec<u8> = (0..len).map(|i| (i % 5) as u8).collect();
            assert_eq!(first_at_or_above(&codes, 5), None, "len {len}");
            for at in 0..len {
                for bad in [5, 6, 0x7f, 0x80, 0xff] {
                    let mut codes = codes.clone();
                    codes[at] = bad;
                    assert_eq!(first_at_or_above(&codes, 5), Some(bad), "{len} {at} {bad}");
                }
            }
        }
        // The largest limit, and a limit of one (only zeros pass).
        assert_eq!(first_at_or_above(&[0x7f; 9], 0x80), None);
        assert_eq!(
            first_at_or_above(&[0, 0, 0, 0, 0, 0, 0, 0x80, 0], 0x80),
            Some(0x80)
        );
        assert_eq!(first_at_or_above(&[0; 8], 1), None);
        assert_eq!(first_at_or_above(&[0, 0, 1, 0, 0, 0, 0, 0], 1), Some(1));
    }
}
