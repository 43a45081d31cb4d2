-- account_tsquery (0010) put the account in front of every quote that follows the start, a space,
-- `!` or `(`: in a query's text form that is also a quote inside a word, doubled there ('a(''b'
-- for the URL word a('b). Such a query came back with the account written into the middle of
-- the word, which is not a tsquery: `q=http://example.com/a('b` answered 500. Each quoted word
-- is now matched whole (a doubled quote is part of it), and only its opening quote is prefixed.
-- Stored words are unaffected: account_lexemes (0012) prefixes only after a space, which no word holds.
CREATE OR REPLACE FUNCTION account_tsquery(account integer, query tsquery) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT regexp_replace(query::text, '''((?:[^'']|'''')*)''', '''' || account || ':\1''', 'g')::tsquery
$$;
