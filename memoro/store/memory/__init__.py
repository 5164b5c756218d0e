"""In-memory search indexes over one user's history, shared by both
backends: BM25 postings and compact vectors per user, loaded from a
backend's consistent read of that user (``source.Snapshot``), refreshed
with what was indexed since, and kept under one byte budget."""
