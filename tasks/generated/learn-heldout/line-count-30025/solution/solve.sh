#!/bin/bash
wc -l < /app/catalog.log > /app/answer.txt
