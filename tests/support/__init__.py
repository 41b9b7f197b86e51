"""Test data: real transcripts from ../shared/data and builders for synthetic ones."""
