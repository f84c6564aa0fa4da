//! A binary numeric as the server reads it (`numeric_recv`): validated,
//! truncated to its display scale, compared as btree compares it. Routing
//! compares bounds with it (`route::value`), the partition hash hashes it
//! (`pghash`).

use std::cmp::Ordering;

use crate::encode::{NUMERIC_DSCALE_MASK, NUMERIC_NAN, NUMERIC_NEG, NUMERIC_NINF, NUMERIC_PINF, NUMERIC_POS};

/// The kinds of numeric in btree order (`cmp_numerics`: -Inf < finite < +Inf < NaN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NumericClass {
    NegInfinity,
    Finite,
    PosInfinity,
    NaN,
}

const NBASE: u16 = 10_000;
const DEC_DIGITS: i32 = 4;

/// A view of a binary numeric as the server stores it after `numeric_recv`:
/// digits beyond the display scale dropped (`trunc_var`), leading zero digits
/// skipped. Trailing zero digits may remain; they do not change the value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Numeric<'a> {
    pub(crate) class: NumericClass,
    pub(crate) negative: bool,
    /// Weight of the first digit (NBASE exponent).
    pub(crate) weight: i32,
    /// Big-endian int16 digits, the first one non-zero (empty for zero).
    pub(crate) digits: &'a [u8],
    /// The last digit is rounded down to a multiple of this (1 = kept whole).
    pub(crate) last_pow10: u16,
}

impl<'a> Numeric<'a> {
    /// Validates like `numeric_recv` and builds the view; `None` for bytes the server rejects.
    pub(crate) fn parse(wire: &'a [u8]) -> Option<Numeric<'a>> {
        let (header, body) = wire.split_first_chunk::<8>()?;
        let be16 = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
        let ndigits = usize::from(be16(0));
        let weight = i32::from(be16(2) as i16);
        let sign = be16(4);
        let dscale = be16(6);
        if body.len() != ndigits * 2 || dscale & NUMERIC_DSCALE_MASK != dscale {
            return None;
        }
        if body.chunks_exact(2).any(|d| u16::from_be_bytes([d[0], d[1]]) >= NBASE) {
            return None;
        }
        let special = |class| Some(Numeric { class, negative: false, weight: 0, digits: &[], last_pow10: 1 });
        let negative = match sign {
            NUMERIC_POS => false,
            NUMERIC_NEG => true,
            NUMERIC_NAN => return special(NumericClass::NaN),
            NUMERIC_PINF => return special(NumericClass::PosInfinity),
            NUMERIC_NINF => return special(NumericClass::NegInfinity),
            _ => return None,
        };
        // trunc_var(value, dscale): keep the digits that hold the first
        // (weight + 1) * 4 + dscale decimal digits, the last one possibly in part.
        let keep_decimal = (weight + 1) * DEC_DIGITS + i32::from(dscale);
        let (mut digits, mut last_pow10) = if keep_decimal <= 0 {
            (&body[..0], 1)
        } else {
            let keep = ((keep_decimal + DEC_DIGITS - 1) / DEC_DIGITS) as usize;
            if keep > ndigits {
                (body, 1)
            } else {
                let partial = keep_decimal % DEC_DIGITS;
                (&body[..keep * 2], if partial > 0 { 10u16.pow((DEC_DIGITS - partial) as u32) } else { 1 })
            }
        };
        let mut weight = weight;
        let mut n = Numeric { class: NumericClass::Finite, negative, weight, digits, last_pow10 };
        while !digits.is_empty() && n.digit(0) == 0 {
            digits = &digits[2..];
            weight -= 1;
            if digits.is_empty() {
                last_pow10 = 1;
            }
            n = Numeric { class: NumericClass::Finite, negative, weight, digits, last_pow10 };
        }
        Some(n)
    }

    pub(crate) fn len(&self) -> usize {
        self.digits.len() / 2
    }

    pub(crate) fn class(&self) -> NumericClass {
        self.class
    }

    /// Weight of the first digit (NBASE exponent), leading zero digits skipped.
    pub(crate) fn weight(&self) -> i32 {
        self.weight
    }

    /// Digit `i` (0 past the end), after the scale truncation.
    #[inline]
    pub(crate) fn digit(&self, i: usize) -> u16 {
        if i >= self.len() {
            return 0;
        }
        let d = u16::from_be_bytes([self.digits[2 * i], self.digits[2 * i + 1]]);
        if i + 1 == self.len() { d - d % self.last_pow10 } else { d }
    }

    /// -1, 0 or 1 for a finite value. Leading zeros are gone, so a value is
    /// zero exactly when it has no digits left.
    fn signum(&self) -> i8 {
        match (self.len(), self.negative) {
            (0, _) => 0,
            (_, true) => -1,
            (_, false) => 1,
        }
    }

    /// `cmp_numerics`.
    pub(crate) fn cmp(&self, other: &Numeric<'_>) -> Ordering {
        if self.class != NumericClass::Finite || other.class != NumericClass::Finite {
            return self.class.cmp(&other.class);
        }
        let (sa, sb) = (self.signum(), other.signum());
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        let magnitude = self.weight.cmp(&other.weight).then_with(|| {
            (0..self.len().max(other.len())).map(|i| self.digit(i).cmp(&other.digit(i))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
        });
        if sa < 0 { magnitude.reverse() } else { magnitude }
    }
}
