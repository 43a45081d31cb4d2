#!/bin/bash -eu
address=$(burnbox alias new --label signup-test)
curl -fsS -d "email=$address" "$APP_URL/signup" > /dev/null
code=$(burnbox mail wait --alias "$address" --otp --timeout "${MAIL_TIMEOUT:-30}")
curl -fsS -d "email=$address&code=$code" "$APP_URL/verify" | grep -q "Email verified"
burnbox alias burn "$address"
