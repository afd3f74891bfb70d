"""The adapters: how a view, a URL binding, DRF or a template asks the engine, and what the member sees."""
