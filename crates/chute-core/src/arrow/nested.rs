//! Lists, structs, maps and dictionary-encoded columns.
//!
//! A list goes into an array column as `array_send` writes it (dimensions,
//! a NULL flag, the element type, then each element as a field); a list of
//! lists is a multidimensional array, refused unless it is rectangular, as
//! the server refuses a ragged one. Structs and maps, and anything else
//! that goes into `json`/`jsonb`, become JSON text (`jsonb`'s binary form is
//! a version byte and the text). A dictionary-encoded column is its values
//! looked up by key.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_schema::DataType;

use super::{ARRAY_SHAPE, Bad, Pg, Values, bind_to, json_string};
use crate::value::EncodeContext;

/// PostgreSQL's `MAXDIM`.
const MAX_DIMENSIONS: usize = 6;

/// Values written as their JSON text into a `json` or `jsonb` column.
pub(super) struct AsJson<'a> {
    pub inner: Box<dyn Values + 'a>,
    pub jsonb: bool,
}

impl Values for AsJson<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.inner.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        if self.jsonb {
            out.push(1);
        }
        self.inner.json(i, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.inner.json(i, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.inner.json(i, out)
    }
}

/// A dictionary-encoded column: its values, looked up by key.
pub(super) fn dictionary<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    let dict = array.as_any_dictionary();
    Box::new(Dictionary { keys: dict.keys(), at: dict.normalized_keys(), values: bind_to(dict.values().as_ref(), pg, typmod, ctx) })
}

struct Dictionary<'a> {
    keys: &'a dyn Array,
    /// Each row's index into the values.
    at: Vec<usize>,
    values: Box<dyn Values + 'a>,
}

impl Values for Dictionary<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.keys.is_null(i) || self.values.is_null(self.at[i])
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        self.values.wire(self.at[i], out)
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.values.text(self.at[i], out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.values.json(self.at[i], out)
    }
}

/// The list array types: where each row's elements are in the child array.
trait ListLike {
    fn nulls_at(&self, i: usize) -> bool;
    /// `(first, count)` of row `i`'s elements.
    fn range(&self, i: usize) -> (usize, usize);
    fn child(&self) -> &ArrayRef;
}

impl<O: OffsetSizeTrait> ListLike for arrow_array::GenericListArray<O> {
    fn nulls_at(&self, i: usize) -> bool {
        self.is_null(i)
    }
    fn range(&self, i: usize) -> (usize, usize) {
        let o = self.value_offsets();
        (o[i].as_usize(), (o[i + 1] - o[i]).as_usize())
    }
    fn child(&self) -> &ArrayRef {
        self.values()
    }
}

impl<O: OffsetSizeTrait> ListLike for arrow_array::GenericListViewArray<O> {
    fn nulls_at(&self, i: usize) -> bool {
        self.is_null(i)
    }
    fn range(&self, i: usize) -> (usize, usize) {
        (self.value_offsets()[i].as_usize(), self.value_sizes()[i].as_usize())
    }
    fn child(&self) -> &ArrayRef {
        self.values()
    }
}

impl ListLike for arrow_array::FixedSizeListArray {
    fn nulls_at(&self, i: usize) -> bool {
        self.is_null(i)
    }
    fn range(&self, i: usize) -> (usize, usize) {
        (self.value_offset_at(i), self.value_length() as usize)
    }
    fn child(&self) -> &ArrayRef {
        self.values()
    }
}

/// The array as a list, when it is one.
fn as_list_like(array: &dyn Array) -> Option<&dyn ListLike> {
    Some(match array.data_type() {
        DataType::List(_) => array.as_list::<i32>(),
        DataType::LargeList(_) => array.as_list::<i64>(),
        DataType::ListView(_) => array.as_list_view::<i32>(),
        DataType::LargeListView(_) => array.as_list_view::<i64>(),
        DataType::FixedSizeList(..) => array.as_fixed_size_list(),
        _ => return None,
    })
}

/// A list column: a PostgreSQL array for an array column, else JSON.
pub(super) fn list<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    let outer = as_list_like(array).expect("a list type");
    match pg {
        Pg::Array { elem, elem_oid } => {
            let mut levels = vec![outer];
            let mut leaf = outer.child().as_ref();
            while let Some(inner) = as_list_like(leaf) {
                levels.push(inner);
                leaf = inner.child().as_ref();
            }
            // The column's type modifier applies to each element.
            Box::new(PgArray { levels, leaf: bind_to(leaf, elem, typmod, ctx), elem_oid: *elem_oid })
        }
        _ => Box::new(JsonList { list: outer, child: bind_to(outer.child().as_ref(), &super::JSON, -1, ctx) }),
    }
}

struct JsonList<'a> {
    list: &'a dyn ListLike,
    child: Box<dyn Values + 'a>,
}

impl Values for JsonList<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.list.nulls_at(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        self.json(i, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.json(i, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let (first, n) = self.list.range(i);
        out.push(b'[');
        for j in first..first + n {
            if j > first {
                out.push(b',');
            }
            if self.child.is_null(j) {
                out.extend_from_slice(b"null");
            } else {
                self.child.json(j, out);
            }
        }
        out.push(b']');
    }
}

/// A list (of lists …) into a PostgreSQL array.
struct PgArray<'a> {
    /// The list levels, outermost first: one per dimension.
    levels: Vec<&'a dyn ListLike>,
    /// The innermost elements.
    leaf: Box<dyn Values + 'a>,
    elem_oid: u32,
}

/// An array value's dimensions and its elements' indices into the leaf array.
type Shape = (Vec<usize>, Vec<usize>);

impl PgArray<'_> {
    /// The array's dimensions, checked rectangular, and its elements'
    /// indices into the leaf array in row-major order (`None` for an empty array).
    fn shape(&self, i: usize) -> Result<Option<Shape>, Bad> {
        let ragged = || Bad::invalid("multidimensional arrays must have sub-arrays with matching dimensions", ARRAY_SHAPE);
        let mut dims = Vec::with_capacity(self.levels.len());
        let mut rows = vec![i];
        for (depth, level) in self.levels.iter().enumerate() {
            let mut next = Vec::new();
            let mut len = None;
            for &r in &rows {
                if depth > 0 && level.nulls_at(r) {
                    return Err(ragged());
                }
                let (first, n) = level.range(r);
                if *len.get_or_insert(n) != n {
                    return Err(ragged());
                }
                next.extend(first..first + n);
            }
            let n = len.unwrap_or(0);
            if n == 0 {
                return Ok(None);
            }
            dims.push(n);
            rows = next;
        }
        if dims.len() > MAX_DIMENSIONS {
            return Err(Bad::invalid(
                format!("number of array dimensions ({}) exceeds the maximum allowed ({MAX_DIMENSIONS})", dims.len()),
                "54000",
            ));
        }
        Ok(Some((dims, rows)))
    }

    /// The array literal of one level: `{…}` of elements or sub-arrays.
    fn write_text(&self, depth: usize, r: usize, out: &mut Vec<u8>) {
        let level = self.levels[depth];
        let (first, n) = level.range(r);
        out.push(b'{');
        for j in first..first + n {
            if j > first {
                out.push(b',');
            }
            if depth + 1 < self.levels.len() {
                self.write_text(depth + 1, j, out);
            } else if self.leaf.is_null(j) {
                out.extend_from_slice(b"NULL");
            } else {
                let mut t = Vec::new();
                self.leaf.text(j, &mut t);
                quote_element(&t, out);
            }
        }
        out.push(b'}');
    }

    fn write_json(&self, depth: usize, r: usize, out: &mut Vec<u8>) {
        let level = self.levels[depth];
        let (first, n) = level.range(r);
        out.push(b'[');
        for j in first..first + n {
            if j > first {
                out.push(b',');
            }
            if depth + 1 < self.levels.len() {
                if level.nulls_at(j) {
                    out.extend_from_slice(b"null");
                } else {
                    self.write_json(depth + 1, j, out);
                }
            } else if self.leaf.is_null(j) {
                out.extend_from_slice(b"null");
            } else {
                self.leaf.json(j, out);
            }
        }
        out.push(b']');
    }
}

/// An array element as `array_in` reads it: quoted when it is empty, says
/// NULL, or holds a delimiter, brace, quote, backslash or whitespace.
fn quote_element(t: &[u8], out: &mut Vec<u8>) {
    let plain = !t.is_empty()
        && !t.eq_ignore_ascii_case(b"NULL")
        && !t.iter().any(|b| matches!(b, b'{' | b'}' | b',' | b'"' | b'\\') || b.is_ascii_whitespace());
    if plain {
        out.extend_from_slice(t);
        return;
    }
    out.push(b'"');
    for &b in t {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

impl Values for PgArray<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.levels[0].nulls_at(i)
    }

    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let start = out.len();
        let Some((dims, elements)) = self.shape(i)? else {
            out.extend_from_slice(&0i32.to_be_bytes());
            out.extend_from_slice(&0i32.to_be_bytes());
            out.extend_from_slice(&self.elem_oid.to_be_bytes());
            return Ok(());
        };
        out.extend_from_slice(&(dims.len() as i32).to_be_bytes());
        let flag = out.len();
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&self.elem_oid.to_be_bytes());
        for d in &dims {
            out.extend_from_slice(&(*d as i32).to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
        }
        let mut nulls = false;
        for j in elements {
            nulls |= self.leaf.is_null(j);
            if let Err(e) = super::write_field(self.leaf.as_ref(), j, out) {
                out.truncate(start);
                return Err(e);
            }
        }
        if nulls {
            out[flag..flag + 4].copy_from_slice(&1i32.to_be_bytes());
        }
        Ok(())
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.write_text(0, i, out)
    }

    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.write_json(0, i, out)
    }
}

/// A struct or a map: a JSON object.
pub(super) fn object<'a>(array: &'a dyn Array, _pg: &'a Pg, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    let json = &super::JSON;
    match array.data_type() {
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let members = fields.iter().zip(s.columns()).map(|(f, c)| (f.name().as_bytes(), bind_to(c.as_ref(), json, -1, ctx))).collect();
            Box::new(Struct { array, members })
        }
        _ => {
            let m = array.as_map();
            Box::new(Map { map: m, keys: bind_to(m.keys().as_ref(), json, -1, ctx), values: bind_to(m.values().as_ref(), json, -1, ctx) })
        }
    }
}

struct Struct<'a> {
    array: &'a dyn Array,
    members: Vec<(&'a [u8], Box<dyn Values + 'a>)>,
}

impl Values for Struct<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.array.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        self.json(i, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.json(i, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        out.push(b'{');
        for (k, (name, v)) in self.members.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            json_string(name, out);
            out.push(b':');
            if v.is_null(i) {
                out.extend_from_slice(b"null");
            } else {
                v.json(i, out);
            }
        }
        out.push(b'}');
    }
}

struct Map<'a> {
    map: &'a arrow_array::MapArray,
    keys: Box<dyn Values + 'a>,
    values: Box<dyn Values + 'a>,
}

impl Values for Map<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.map.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        self.json(i, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        self.json(i, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let o = self.map.value_offsets();
        let (first, end) = (o[i] as usize, o[i + 1] as usize);
        out.push(b'{');
        let mut key = Vec::new();
        for j in first..end {
            if j > first {
                out.push(b',');
            }
            // An object's keys are strings: a key's text, quoted.
            key.clear();
            if !self.keys.is_null(j) {
                self.keys.text(j, &mut key);
            }
            json_string(&key, out);
            out.push(b':');
            if self.values.is_null(j) {
                out.extend_from_slice(b"null");
            } else {
                self.values.json(j, out);
            }
        }
        out.push(b'}');
    }
}
