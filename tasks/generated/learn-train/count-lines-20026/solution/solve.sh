#!/bin/bash
grep -cx silver /app/entries.log > /app/count.txt
