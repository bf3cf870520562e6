#!/bin/bash
jq -r .name /app/user.json > /app/name.txt
