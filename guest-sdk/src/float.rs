//! The larger or smaller of two numbers, as `f64::max` and `f64::min`
//! define them, without a function call in WebAssembly.
//!
//! WebAssembly's `f64.max` returns NaN when either side is NaN, so Rust's
//! `max` and `min` (which ignore a NaN side) compile there to calls into
//! libc's `fmax` and `fmin`. A call per host was about a quarter of the
//! even-memory and even-CPU scores' time in the sandbox (`perf` with the
//! guests' functions named). In WebAssembly these functions give libc's
//! answer in a few inlined comparisons: a NaN side is ignored, and of two
//! zeros `max` gives `+0` and `min` gives `-0`. Natively they are `std`'s,
//! which the compiler turns into vector instructions; `std` leaves the sign
//! of a zero answer open, and that is all that may differ.

/// The larger of `x` and `y`; the other when one is NaN.
#[inline]
pub fn max(x: f64, y: f64) -> f64 {
    if cfg!(target_arch = "wasm32") {
        inline_max(x, y)
    } else {
        x.max(y)
    }
}

/// The smaller of `x` and `y`; the other when one is NaN.
#[inline]
pub fn min(x: f64, y: f64) -> f64 {
    if cfg!(target_arch = "wasm32") {
        inline_min(x, y)
    } else {
        x.min(y)
    }
}

/// [`max`] for `f32`.
#[inline]
pub fn max_f32(x: f32, y: f32) -> f32 {
    if cfg!(target_arch = "wasm32") {
        inline_max_f32(x, y)
    } else {
        x.max(y)
    }
}

/// [`min`] for `f32`.
#[inline]
pub fn min_f32(x: f32, y: f32) -> f32 {
    if cfg!(target_arch = "wasm32") {
        inline_min_f32(x, y)
    } else {
        x.min(y)
    }
}

/// libc's `fmax` in WebAssembly: `+0` of two zeros.
#[inline]
fn inline_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y > x || (y == x && x.is_sign_negative()) {
        y
    } else {
        x
    }
}

/// libc's `fmin` in WebAssembly: `-0` of two zeros.
#[inline]
fn inline_min(x: f64, y: f64) -> f64 {
    if x.is_nan() || y < x || (y == x && y.is_sign_negative()) {
        y
    } else {
        x
    }
}

#[inline]
fn inline_max_f32(x: f32, y: f32) -> f32 {
    if x.is_nan() || y > x || (y == x && x.is_sign_negative()) {
        y
    } else {
        x
    }
}

#[inline]
fn inline_min_f32(x: f32, y: f32) -> f32 {
    if x.is_nan() || y < x || (y == x && y.is_sign_negative()) {
        y
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values covering NaN, both zeros, infinities and ordinary numbers.
    const VALUES: [f64; 9] = [
        f64::NAN,
        0.0,
        -0.0,
        1.5,
        -1.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        1e300,
    ];

    #[test]
    fn inline_versions_agree_with_std_wherever_std_defines_the_answer() {
        for x in VALUES {
            for y in VALUES {
                if !(x == 0.0 && y == 0.0) {
                    assert_eq!(
                        inline_max(x, y).to_bits(),
                        x.max(y).to_bits(),
                        "max({x}, {y})"
                    );
                    assert_eq!(
                        inline_min(x, y).to_bits(),
                        x.min(y).to_bits(),
                        "min({x}, {y})"
                    );
                }
                let (a, b) = (x as f32, y as f32);
                if !(a == 0.0 && b == 0.0) {
                    assert_eq!(
                        inline_max_f32(a, b).to_bits(),
                        a.max(b).to_bits(),
                        "{a}, {b}"
                    );
                    assert_eq!(
                        inline_min_f32(a, b).to_bits(),
                        a.min(b).to_bits(),
                        "{a}, {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_nan_side_is_ignored_and_two_nans_give_nan() {
        assert_eq!(inline_max(f64::NAN, 2.0), 2.0);
        assert_eq!(inline_max(2.0, f64::NAN), 2.0);
        assert_eq!(inline_min(f64::NAN, -2.0), -2.0);
        assert!(inline_max(f64::NAN, f64::NAN).is_nan() && inline_min(f64::NAN, f64::NAN).is_nan());
    }

    /// Where std leaves the sign open, libc's `fmax`/`fmin` in WebAssembly
    /// (what the units called before) give these.
    #[test]
    fn of_two_zeros_max_is_positive_and_min_negative() {
        for (x, y) in [(0.0_f64, -0.0_f64), (-0.0, 0.0), (0.0, 0.0), (-0.0, -0.0)] {
            let both_negative = x.is_sign_negative() && y.is_sign_negative();
            assert_eq!(
                inline_max(x, y).is_sign_negative(),
                both_negative,
                "{x}, {y}"
            );
            let either_negative = x.is_sign_negative() || y.is_sign_negative();
            assert_eq!(
                inline_min(x, y).is_sign_negative(),
                either_negative,
                "{x}, {y}"
            );
            let (a, b) = (x as f32, y as f32);
            assert_eq!(inline_max_f32(a, b).is_sign_negative(), both_negative);
            assert_eq!(inline_min_f32(a, b).is_sign_negative(), either_negative);
        }
    }
}
