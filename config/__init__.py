"""paimond.config"""
