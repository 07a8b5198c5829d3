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

/// A deploy workflow's `on:`: a `workflow_dispatch` with an input of each
/// kind, what the reader and the dispatch matcher are both tested on.
pub fn deploy_dispatch() -> YamlNode {
    let text = "workflow_dispatch:
  inputs:
    environment: {type: choice, options: [staging, production], default: staging}
    version: {required: true, type: string}
    dry_run: {type: boolean, default: false}
    replicas: {type: number}
    count: {type: number, default: '3'}
    target: {type: environment}
    note:
";
    YamlNode::parse(text).expect("the fixture is YAML")
}
