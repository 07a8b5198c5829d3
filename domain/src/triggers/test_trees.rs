//! `on:` trees written in a test: YAML's shape without its text, so a
//! table of cases reads as the tree it gives the reader.

use crate::workflows::yaml::YamlNode;

pub fn s(text: &str) -> YamlNode {
    YamlNode::String(text.into())
}

pub fn map(entries: Vec<(&str, YamlNode)>) -> YamlNode {
    YamlNode::Mapping(entries.into_iter().map(|(k, v)| (s(k), v)).collect())
}

pub fn list(items: &[&str]) -> YamlNode {
    YamlNode::Sequence(items.iter().map(|i| s(i)).collect())
}
