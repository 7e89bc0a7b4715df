"""paimond.maintenance"""
