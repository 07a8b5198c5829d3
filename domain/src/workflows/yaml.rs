//! A YAML document as a plain tree that keeps mapping entries in order and
//! **keeps duplicate keys**, so the definition reader can report
//! "duplicate job id `build`" with the job and field instead of a parser
//! error, and can read every field by hand with a precise message.
//!
//! Parsing is done by `serde_norway` (libyaml), which bounds nesting depth
//! and alias expansion, so a hostile document cannot blow up memory.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

/// One YAML value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum YamlNode {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    String(String),
    Sequence(Vec<YamlNode>),
    /// Entries in document order, duplicates included.
    Mapping(Vec<(YamlNode, YamlNode)>),
}

impl YamlNode {
    /// Parses one YAML document.
    pub(crate) fn parse(yaml: &str) -> Result<Self, serde_norway::Error> {
        serde_norway::from_str(yaml)
    }

    /// What the value is, for "expected …, found …" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            YamlNode::Null => "null",
            YamlNode::Bool(_) => "a boolean",
            YamlNode::Integer(_) | YamlNode::Float(_) => "a number",
            YamlNode::String(_) => "a string",
            YamlNode::Sequence(_) => "a list",
            YamlNode::Mapping(_) => "a mapping",
        }
    }

    /// The text of a scalar (strings, numbers, booleans); `None` for null,
    /// lists and mappings.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match self {
            YamlNode::String(text) => Some(text.clone()),
            YamlNode::Bool(value) => Some(value.to_string()),
            YamlNode::Integer(value) => Some(value.to_string()),
            YamlNode::Float(value) => Some(value.to_string()),
            YamlNode::Null | YamlNode::Sequence(_) | YamlNode::Mapping(_) => None,
        }
    }
}

impl YamlNode {
    /// The value as JSON (a mapping's keys as their text; the last of
    /// duplicate keys wins): what a matrix's object values are kept as.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            YamlNode::Null => Value::Null,
            YamlNode::Bool(value) => Value::Bool(*value),
            YamlNode::Integer(value) => {
                i64::try_from(*value).map_or_else(|_| Value::String(value.to_string()), Value::from)
            }
            YamlNode::Float(value) => serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number),
            YamlNode::String(text) => Value::String(text.clone()),
            YamlNode::Sequence(items) => Value::Array(items.iter().map(YamlNode::to_json).collect()),
            YamlNode::Mapping(entries) => Value::Object(
                entries.iter().map(|(key, value)| (key.scalar_text().unwrap_or_default(), value.to_json())).collect(),
            ),
        }
    }
}

/// Written as JSON keeping a mapping's entries in document order (keys as
/// their text): what a matrix decided when its job is due keeps of its
/// `strategy:`, read back as the same tree.
impl Serialize for YamlNode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            YamlNode::Null => serializer.serialize_unit(),
            YamlNode::Bool(value) => serializer.serialize_bool(*value),
            YamlNode::Integer(value) => serializer.serialize_i128(*value),
            YamlNode::Float(value) => serializer.serialize_f64(*value),
            YamlNode::String(text) => serializer.serialize_str(text),
            YamlNode::Sequence(items) => serializer.collect_seq(items),
            YamlNode::Mapping(entries) => serializer
                .collect_map(entries.iter().map(|(key, value)| (key.scalar_text().unwrap_or_default(), value))),
        }
    }
}

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = YamlNode;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<YamlNode, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<YamlNode, E> {
        Ok(YamlNode::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<YamlNode, E> {
        Ok(YamlNode::Integer(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<YamlNode, E> {
        Ok(YamlNode::Integer(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<YamlNode, E> {
        Ok(YamlNode::Integer(value))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<YamlNode, E> {
        i128::try_from(value).map(YamlNode::Integer).map_err(|_| E::custom("integer out of range"))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<YamlNode, E> {
        Ok(YamlNode::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<YamlNode, E> {
        Ok(YamlNode::String(value.to_string()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<YamlNode, E> {
        Ok(YamlNode::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<YamlNode, A::Error> {
        let mut sequence = Vec::new();
        while let Some(item) = items.next_element()? {
            sequence.push(item);
        }
        Ok(YamlNode::Sequence(sequence))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<YamlNode, A::Error> {
        let mut mapping = Vec::new();
        while let Some(entry) = entries.next_entry()? {
            mapping.push(entry);
        }
        Ok(YamlNode::Mapping(mapping))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _tagged: A) -> Result<YamlNode, A::Error> {
        Err(de::Error::custom("YAML tags (`!tag value`) are not supported"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> YamlNode {
        YamlNode::String(text.into())
    }

    #[test]
    fn mapping_keeps_document_order_and_duplicate_keys() {
        let node = YamlNode::parse("b: 1\na: 2\nb: 3\n").unwrap();
        assert_eq!(
            node,
            YamlNode::Mapping(vec![
                (string("b"), YamlNode::Integer(1)),
                (string("a"), YamlNode::Integer(2)),
                (string("b"), YamlNode::Integer(3)),
            ])
        );
    }

    #[test]
    fn scalars_keep_their_yaml_types() {
        let node = YamlNode::parse("[x, 1, 1.5, true, null, ~, '1']").unwrap();
        assert_eq!(
            node,
            YamlNode::Sequence(vec![
                string("x"),
                YamlNode::Integer(1),
                YamlNode::Float(1.5),
                YamlNode::Bool(true),
                YamlNode::Null,
                YamlNode::Null,
                string("1"),
            ])
        );
    }

    #[test]
    fn on_and_yes_are_strings_not_booleans() {
        // YAML 1.2: a GitHub-style `on:` key must stay the string "on".
        let node = YamlNode::parse("on: push\nyes: no\n").unwrap();
        assert_eq!(node, YamlNode::Mapping(vec![(string("on"), string("push")), (string("yes"), string("no"))]));
    }

    #[test]
    fn aliases_are_expanded() {
        let node = YamlNode::parse("a: &x [1]\nb: *x\n").unwrap();
        let YamlNode::Mapping(entries) = node else { panic!("mapping expected") };
        assert_eq!(entries[1].1, YamlNode::Sequence(vec![YamlNode::Integer(1)]));
    }

    #[test]
    fn an_alias_bomb_is_refused_instead_of_expanded() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let previous = format!("*a{}", level - 1);
            bomb.push_str(&format!("a{level}: &a{level} [{}]\n", vec![previous; 10].join(", ")));
        }
        assert!(YamlNode::parse(&bomb).is_err());
    }

    #[test]
    fn custom_tags_are_refused() {
        assert!(YamlNode::parse("a: !secret x\n").is_err());
    }

    #[test]
    fn scalar_text_renders_numbers_and_booleans() {
        assert_eq!(YamlNode::Integer(3).scalar_text().as_deref(), Some("3"));
        assert_eq!(YamlNode::Bool(false).scalar_text().as_deref(), Some("false"));
        assert_eq!(YamlNode::Sequence(vec![]).scalar_text(), None);
    }
}
