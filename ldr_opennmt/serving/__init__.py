"""Serving: SavedModel client and CTranslate2 folding."""
