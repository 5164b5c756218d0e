"""Past conversations: chunking, embeddings, keyword text, fusion
and the durable job queue's worker. Storage lives in memoro.store."""
