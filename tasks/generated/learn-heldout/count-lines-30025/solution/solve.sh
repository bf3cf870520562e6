#!/bin/bash
grep -cx falcon /app/entries.log > /app/result.txt
