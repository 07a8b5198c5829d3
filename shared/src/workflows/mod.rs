//! The workflows context: pure decisions (definitions, DAG scheduling, status derivation, reruns). No I/O.
