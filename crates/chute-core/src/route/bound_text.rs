//! Parsing the partition bounds `pg_get_expr(relpartbound, oid)` prints.
//!
//! The catalog keeps bounds as node trees whose constants are raw datums in
//! the server's memory layout; the only portable way to read them is the
//! server's own deparser (`get_rule_expr` on a `PartitionBoundSpec` in
//! `src/backend/utils/adt/ruleutils.c`). It prints constants without type
//! decoration: numbers bare when they re-parse as numbers (`5`, `1.01`),
//! everything else as a quoted literal with `'` doubled (`'-5'`, `'2024-01-01
//! 00:00:00+00'`, `'it''s'`), booleans as `true`/`false`. This module splits
//! that text into literal strings; `chute-engine` then has the server cast
//! them to the key column's type and send them back in binary. The session
//! must have `standard_conforming_strings` on, so that a backslash is just a
//! character.

/// A bound as printed, its values still text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundText {
    Default,
    Range { from: Vec<Literal>, to: Vec<Literal> },
    List(Vec<Literal>),
    Hash { modulus: u64, remainder: u64 },
}

/// One value of a printed bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    Null,
    MinValue,
    MaxValue,
    /// The literal's text, unquoted: what the type's input function reads.
    Value(String),
}

/// Text that is not a bound as PostgreSQL 15 prints one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected partition bound {text:?}: {reason}")]
pub struct BoundTextError {
    pub text: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Open,
    Close,
    Comma,
}

fn tokenize(text: &str) -> Result<Vec<Token>, &'static str> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | ',' => {
                chars.next();
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    _ => Token::Comma,
                });
            }
            '\'' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('\'') if chars.peek() == Some(&'\'') => {
                            chars.next();
                            s.push('\'');
                        }
                        Some('\'') => break,
                        Some(c) => s.push(c),
                        None => return Err("an unterminated quoted literal"),
                    }
                }
                tokens.push(Token::Quoted(s));
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+') => {
                let mut w = String::new();
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')) {
                    w.push(c);
                    chars.next();
                }
                tokens.push(Token::Word(w));
            }
            _ => return Err("a character outside literals, words and parentheses (a cast?)"),
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: std::vec::IntoIter<Token>,
}

impl Parser {
    fn next(&mut self) -> Result<Token, &'static str> {
        self.tokens.next().ok_or("it ends too early")
    }

    fn keyword(&mut self, word: &'static str) -> Result<(), &'static str> {
        match self.next()? {
            Token::Word(w) if w.eq_ignore_ascii_case(word) => Ok(()),
            _ => Err("a keyword is missing"),
        }
    }

    fn expect(&mut self, token: Token) -> Result<(), &'static str> {
        if self.next()? == token { Ok(()) } else { Err("a parenthesis or comma is missing") }
    }

    fn number(&mut self) -> Result<u64, &'static str> {
        match self.next()? {
            Token::Word(w) => w.parse().map_err(|_| "a modulus or remainder is not a number"),
            _ => Err("a modulus or remainder is not a number"),
        }
    }

    /// `( literal [, literal]* )`
    fn tuple(&mut self) -> Result<Vec<Literal>, &'static str> {
        self.expect(Token::Open)?;
        let mut values = Vec::new();
        loop {
            values.push(match self.next()? {
                Token::Quoted(s) => Literal::Value(s),
                Token::Word(w) if w.eq_ignore_ascii_case("NULL") => Literal::Null,
                Token::Word(w) if w.eq_ignore_ascii_case("MINVALUE") => Literal::MinValue,
                Token::Word(w) if w.eq_ignore_ascii_case("MAXVALUE") => Literal::MaxValue,
                Token::Word(w) => Literal::Value(w),
                _ => return Err("a value is missing"),
            });
            match self.next()? {
                Token::Comma => continue,
                Token::Close => return Ok(values),
                _ => return Err("a parenthesis or comma is missing"),
            }
        }
    }

    fn bound(&mut self) -> Result<BoundText, &'static str> {
        match self.next()? {
            Token::Word(w) if w.eq_ignore_ascii_case("DEFAULT") => return Ok(BoundText::Default),
            Token::Word(w) if w.eq_ignore_ascii_case("FOR") => self.keyword("VALUES")?,
            _ => return Err("it starts with neither FOR VALUES nor DEFAULT"),
        }
        match self.next()? {
            Token::Word(w) if w.eq_ignore_ascii_case("FROM") => {
                let from = self.tuple()?;
                self.keyword("TO")?;
                Ok(BoundText::Range { from, to: self.tuple()? })
            }
            Token::Word(w) if w.eq_ignore_ascii_case("IN") => Ok(BoundText::List(self.tuple()?)),
            Token::Word(w) if w.eq_ignore_ascii_case("WITH") => {
                self.expect(Token::Open)?;
                self.keyword("modulus")?;
                let modulus = self.number()?;
                self.expect(Token::Comma)?;
                self.keyword("remainder")?;
                let remainder = self.number()?;
                self.expect(Token::Close)?;
                Ok(BoundText::Hash { modulus, remainder })
            }
            _ => Err("FOR VALUES is followed by neither FROM, IN nor WITH"),
        }
    }
}

/// Parses one bound as `pg_get_expr(relpartbound, oid)` prints it.
pub fn parse_bound(text: &str) -> Result<BoundText, BoundTextError> {
    let error = |reason| BoundTextError { text: text.to_owned(), reason };
    let mut parser = Parser { tokens: tokenize(text).map_err(error)?.into_iter() };
    let bound = parser.bound().map_err(error)?;
    if parser.tokens.next().is_some() {
        return Err(error("text follows the bound"));
    }
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Literal {
        Literal::Value(s.into())
    }

    #[test]
    fn range_bounds_with_quotes_negatives_and_unbounded_columns() {
        // Printed by PostgreSQL 15.18 for a five-column key.
        let text = "FOR VALUES FROM ('-5', '-10', '-1.5', '-2.5', 'it''s \\ ok') TO (5, '10', 'NaN', 'Infinity', MAXVALUE)";
        assert_eq!(
            parse_bound(text).unwrap(),
            BoundText::Range {
                from: vec![v("-5"), v("-10"), v("-1.5"), v("-2.5"), v("it's \\ ok")],
                to: vec![v("5"), v("10"), v("NaN"), v("Infinity"), Literal::MaxValue],
            }
        );
        assert_eq!(
            parse_bound("FOR VALUES FROM (MINVALUE) TO ('2024-01-01 00:00:00+00')").unwrap(),
            BoundText::Range { from: vec![Literal::MinValue], to: vec![v("2024-01-01 00:00:00+00")] }
        );
        assert_eq!(
            parse_bound("FOR VALUES FROM (6, 0.00001) TO (6, MAXVALUE)").unwrap(),
            BoundText::Range { from: vec![v("6"), v("0.00001")], to: vec![v("6"), Literal::MaxValue] }
        );
    }

    #[test]
    fn list_hash_and_default_bounds() {
        assert_eq!(
            parse_bound("FOR VALUES IN ('ab   ', NULL, 'x''y  ')").unwrap(),
            BoundText::List(vec![v("ab   "), Literal::Null, v("x'y  ")])
        );
        assert_eq!(parse_bound("FOR VALUES IN (true, NULL)").unwrap(), BoundText::List(vec![v("true"), Literal::Null]));
        assert_eq!(parse_bound("FOR VALUES IN ('')").unwrap(), BoundText::List(vec![v("")]));
        assert_eq!(parse_bound("FOR VALUES IN ('a,b', '(c)')").unwrap(), BoundText::List(vec![v("a,b"), v("(c)")]));
        assert_eq!(parse_bound("FOR VALUES WITH (modulus 8, remainder 3)").unwrap(), BoundText::Hash { modulus: 8, remainder: 3 });
        assert_eq!(parse_bound("DEFAULT").unwrap(), BoundText::Default);
    }

    #[test]
    fn anything_else_is_an_error() {
        for text in [
            "",
            "FOR VALUES",
            "FOR VALUES IN ('a'",
            "FOR VALUES IN ('a)",
            "FOR VALUES IN ('a'::text)",
            "FOR VALUES FROM (1) (2)",
            "FOR VALUES WITH (modulus x, remainder 1)",
            "DEFAULT DEFAULT",
            "FOR VALUES IN ()",
        ] {
            assert!(parse_bound(text).is_err(), "{text:?} parsed");
        }
    }
}
