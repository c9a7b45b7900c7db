"""The app's pages, one module per page (plus the views a page splits off): widgets in, attn_core called,
charts drawn. No attention math."""
