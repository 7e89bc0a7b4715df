"""paimond.table"""
