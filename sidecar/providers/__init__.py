"""Model providers: the OpenAI-compatible and Anthropic wire formats, and the call policy over them."""
