"""Every environment variable hcmcp reads, read once at start and parsed strictly."""
