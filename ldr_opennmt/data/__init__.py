"""Corpus builders: the default multi-domain corpus and OPUS loaders."""
