"""paimond.format"""
