"""File operations confined to one root folder, safe against symlink and path races."""
