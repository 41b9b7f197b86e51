"""Workflows of many agent steps that survive their process and spread over machines (L-6, L-7, B-13).

The home of the durable workflow engine on DBOS: steps, gates, retries, continuity across processes and
parallel steps across machines. Empty until that engine lands.
"""
