"""Text in: documents from strings and RAG frameworks (documents), the exact prompt and where each chunk sits
(prompting), and sentences, tokens and chunks as character offsets and token ranges (segmentation)."""
