"""paimond.daemon"""
