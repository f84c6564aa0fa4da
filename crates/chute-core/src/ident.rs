//! SQL identifiers: parsing user-given names and quoting every name chute puts
//! into SQL.
//!
//! chute builds DDL and COPY statements from table, column and partition names
//! that come from users and from the catalog. Every one of them is quoted with
//! [`quote_ident`] so that a table named `x"; DROP TABLE y; --` is only a name,
//! and every name chute generates is checked against PostgreSQL's 63-byte limit
//! ([`NAMEDATALEN`] - 1) before any DDL runs, because the server would silently
//! truncate it and two partitions could end up with the same name.

use std::fmt;

/// PostgreSQL's identifier limit is `NAMEDATALEN - 1` bytes.
pub const NAMEDATALEN: usize = 64;
/// The longest identifier PostgreSQL keeps without truncating it.
pub const MAX_IDENT_BYTES: usize = NAMEDATALEN - 1;

/// An identifier that does not fit PostgreSQL's limits or cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    #[error(
        "the name {name:?} is {len} bytes long; PostgreSQL keeps at most 63 bytes and would truncate it. Choose a shorter table or partition name"
    )]
    TooLong { name: String, len: usize },
    #[error("an empty name is not a valid SQL identifier")]
    Empty,
    #[error("the name {name:?} holds a NUL byte, which no PostgreSQL name can")]
    Nul { name: String },
    #[error("cannot parse {input:?} as [schema.]name: {reason}")]
    Syntax { input: String, reason: &'static str },
}

/// Quotes an identifier the way `quote_ident()` does when quoting is needed,
/// except that it always quotes: `"name"`, with `"` doubled.
pub fn quote_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Quotes a string literal for SQL (`'…'`, with `'` doubled). Backslashes are
/// not special because chute's sessions keep `standard_conforming_strings` on.
pub fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Dollar-quotes `body` (a function's or a `DO` block's text) with a tag
/// that does not occur in it: `$chute$…$chute$`, or `$chute1$`, `$chute2$`…
/// when the body holds that tag, as it does when a table is named `m$chute$`
/// (the body names the table, and a fixed tag would end the quote there).
pub fn dollar_quote(body: &str) -> String {
    let mut n = 0u32;
    loop {
        let tag = if n == 0 { "$chute$".to_owned() } else { format!("$chute{n}$") };
        // The quote ends at the first tag after the opening one, so the
        // tag must first appear where the closing one is put (a body ending
        // in `$chute` would otherwise end it early).
        let closed = format!("{body}{tag}");
        if closed.find(&tag) == Some(body.len()) {
            return format!("{tag}{closed}");
        }
        n += 1;
    }
}

/// Checks a name that chute is about to create against the 63-byte limit.
pub fn check_length(name: &str) -> Result<(), IdentError> {
    if name.is_empty() {
        return Err(IdentError::Empty);
    }
    if name.len() > MAX_IDENT_BYTES {
        return Err(IdentError::TooLong { name: name.to_owned(), len: name.len() });
    }
    Ok(())
}

/// A possibly schema-qualified relation name, as the user wrote it, after the
/// identifier rules of SQL: unquoted parts fold to lower case, quoted parts
/// keep their case and may contain dots.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct QualifiedName {
    /// `None` means "resolve through search_path".
    pub schema: Option<String>,
    pub name: String,
}

impl QualifiedName {
    pub fn new(schema: impl Into<String>, name: impl Into<String>) -> Self {
        QualifiedName { schema: Some(schema.into()), name: name.into() }
    }

    /// Parses `name`, `schema.name`, `"Mixed Case"."a.b"` and so on.
    pub fn parse(input: &str) -> Result<Self, IdentError> {
        let parts = split_qualified(input)?;
        match parts.as_slice() {
            [name] => Ok(QualifiedName { schema: None, name: name.clone() }),
            [schema, name] => Ok(QualifiedName { schema: Some(schema.clone()), name: name.clone() }),
            _ => Err(IdentError::Syntax { input: input.to_owned(), reason: "expected at most one dot outside quotes" }),
        }
    }

    /// The name quoted for SQL: `"schema"."name"` or `"name"`.
    pub fn quoted(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}", quote_ident(s), quote_ident(&self.name)),
            None => quote_ident(&self.name),
        }
    }

    /// The same table name in another schema (or the same one).
    pub fn with_name(&self, name: impl Into<String>) -> Self {
        QualifiedName { schema: self.schema.clone(), name: name.into() }
    }
}

impl fmt::Display for QualifiedName {
    /// Shown to people: unquoted when that is unambiguous.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |s: &str| {
            let plain = !s.is_empty()
                && s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if plain { s.to_owned() } else { quote_ident(s) }
        };
        match &self.schema {
            Some(s) => write!(f, "{}.{}", show(s), show(&self.name)),
            None => write!(f, "{}", show(&self.name)),
        }
    }
}

fn split_qualified(input: &str) -> Result<Vec<String>, IdentError> {
    let syntax = |reason| IdentError::Syntax { input: input.to_owned(), reason };
    let mut parts = Vec::new();
    let mut chars = input.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some(c) => part.push(c),
                    None => return Err(syntax("unterminated quoted identifier")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if c == '"' {
                    return Err(syntax("a quote in the middle of a name"));
                }
                part.extend(c.to_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return Err(IdentError::Empty);
        }
        if part.contains('\0') {
            return Err(IdentError::Nul { name: part });
        }
        parts.push(part);
        match chars.next() {
            None => break,
            Some('.') => continue,
            Some(_) => return Err(syntax("unexpected text after a quoted name")),
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_ident(r#"x"; DROP TABLE y; --"#), r#""x""; DROP TABLE y; --""#);
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn dollar_quotes_never_end_inside_the_body() {
        assert_eq!(dollar_quote("BEGIN END"), "$chute$BEGIN END$chute$");
        let body = r#"DELETE FROM "m$chute$_chute_split""#;
        assert_eq!(dollar_quote(body), format!("$chute1${body}$chute1$"));
        assert_eq!(dollar_quote("a $chute$ b $chute1$"), "$chute2$a $chute$ b $chute1$$chute2$");
        // A body that ends where the tag begins.
        assert_eq!(dollar_quote("x$chute"), "$chute1$x$chute$chute1$");
    }

    #[test]
    fn parse_folds_unquoted_and_keeps_quoted() {
        assert_eq!(QualifiedName::parse("Metrics").unwrap(), QualifiedName { schema: None, name: "metrics".into() });
        assert_eq!(QualifiedName::parse(r#"Sch."My.Table""#).unwrap(), QualifiedName::new("sch", "My.Table"));
        assert_eq!(QualifiedName::parse(r#""a""b""#).unwrap().name, r#"a"b"#);
        assert!(QualifiedName::parse("a.b.c").is_err());
        assert!(QualifiedName::parse("\"open").is_err());
        assert!(QualifiedName::parse("a.").is_err());
    }

    #[test]
    fn display_quotes_only_when_needed() {
        assert_eq!(QualifiedName::new("public", "readings").to_string(), "public.readings");
        assert_eq!(QualifiedName::new("public", "Readings").to_string(), "public.\"Readings\"");
    }

    #[test]
    fn length_limit_is_63_bytes() {
        assert!(check_length(&"a".repeat(63)).is_ok());
        assert!(matches!(check_length(&"a".repeat(64)), Err(IdentError::TooLong { len: 64, .. })));
        // Bytes, not characters: 32 two-byte characters are 64 bytes.
        assert!(check_length(&"é".repeat(32)).is_err());
    }
}
