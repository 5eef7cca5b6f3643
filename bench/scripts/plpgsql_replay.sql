\set k random(1, 10000)
SELECT outcome, response FROM ref_claim('r' || :k, '{"order": "A1", "amount": 100}');
