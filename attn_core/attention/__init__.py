"""The attention mechanisms of chapter 3 and their modern kin: the book's classes, masks, the variant registry and
the config that picks one, grouped-query and latent attention, efficient and tiled paths, the KV cache."""
