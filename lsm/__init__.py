"""paimond.lsm"""
