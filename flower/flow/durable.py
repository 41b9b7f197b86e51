"""DBOS workflow and step functions for flower's workflows (filled in below)."""
